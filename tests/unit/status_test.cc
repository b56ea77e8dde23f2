#include <memory>

#include <gtest/gtest.h>

#include <octop/status.h>

namespace octop {
namespace {

TEST(Status, OkHasNoMessage) {
  Status s = Status::Ok();
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(Status, MapsCodesToBackstageNamesAndHttp) {
  struct Case {
    Status status;
    std::string_view name;
    int http;
  };
  const Case cases[] = {
      {InvalidArgumentError("bad"), "InputError", 400},
      {NotFoundError("x"), "NotFoundError", 404},
      {ConflictError("x"), "ConflictError", 409},
      {UnauthenticatedError("x"), "AuthenticationError", 401},
      {PermissionDeniedError("x"), "NotAllowedError", 403},
      {UnavailableError("x"), "ServiceUnavailableError", 503},
      {InternalError("x"), "Error", 500},
      {DeadlineExceededError("x"), "Error", 504},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(ErrorName(c.status.code()), c.name);
    EXPECT_EQ(HttpStatus(c.status.code()), c.http);
  }
  EXPECT_EQ(NotFoundError("Task x does not exist").ToString(), "NotFoundError: Task x does not exist");
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  OCTOP_ASSIGN_OR_RETURN(int half, Half(x));
  OCTOP_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int x) {
  OCTOP_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(Result, HoldsValueOrError) {
  Result<int> r = Quarter(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  Result<int> e = Quarter(6);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status(), InvalidArgumentError("3 is odd"));
  EXPECT_EQ(e.value_or(-1), -1);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(Result, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace octop
