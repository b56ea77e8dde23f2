// Transactional enqueue from the public headers alone: a sign-up writes the user's row and enqueues the
// welcome mail in one transaction, so the mail exists if and only if the user does (docs/jobs.md).
//   transactional-enqueue DATABASE_URL     e.g. sqlite:/tmp/octop-example, postgresql://octop@db/app
// Exits 0 when the refused sign-up left neither row nor job and the accepted one left both, and the job ran.
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include <octop/job.h>
#include <octop/queue.h>
#include <octop/status.h>
#include <octop/transaction.h>

namespace {

// Inserts the user and enqueues the welcome mail; `accept` false makes the callback fail after both.
octop::Result<std::string> SignUp(octop::JobQueue& queue, const std::string& name, bool accept) {
  std::string job_id;
  octop::Status s = queue.WithTransaction([&](octop::Transaction& tx) -> octop::Status {
    OCTOP_RETURN_IF_ERROR(tx.Execute("INSERT INTO example_users (name) VALUES ($1)", {name}).status());
    OCTOP_ASSIGN_OR_RETURN(
        octop::EnqueueResult job,
        queue.EnqueueTx(tx, {.kind = "welcome", .payload = "{\"user\":\"" + name + "\"}"}));
    job_id = job.id;
    return accept ? octop::Status::Ok() : octop::InvalidArgumentError("sign-up refused");
  });
  if (!s.ok()) return s;
  return job_id;
}

bool Fail(const std::string& what) {
  std::cerr << "transactional-enqueue: " << what << "\n";
  return false;
}

bool Run(const std::string& url) {
  auto opened =
      octop::JobQueue::Open({.database_url = url, .logger = [](octop::LogLevel, std::string_view) {}});
  if (!opened.ok()) return Fail(opened.status().ToString());
  octop::JobQueue& queue = **opened;
  std::atomic<int> welcomed{0};
  if (!queue
           .RegisterHandler("welcome",
                            [&](const octop::JobContext&) {
                              ++welcomed;
                              return octop::JobResult::Done();
                            })
           .ok() ||
      !queue.AddWorkers("default", 1).ok() || !queue.Start().ok()) {
    return Fail("cannot start the queue");
  }
  octop::Status table = queue.WithTransaction([](octop::Transaction& tx) {
    return tx.Execute("CREATE TABLE IF NOT EXISTS example_users (name text)", {}).status();
  });
  if (!table.ok()) return Fail(table.ToString());

  auto refused = SignUp(queue, "eve", false);
  if (refused.ok()) return Fail("the refused sign-up committed");
  auto accepted = SignUp(queue, "ada", true);
  if (!accepted.ok()) return Fail(accepted.status().ToString());

  // The job runs on this node's worker, woken by the commit's notification; a deadline, not a sleep.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    auto job = queue.GetJob(*accepted);
    if (job.ok() && job->status == octop::JobStatus::kSuccess) break;
    if (std::chrono::steady_clock::now() > deadline) return Fail("the welcome job did not run");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  octop::Status users = queue.WithTransaction([](octop::Transaction& tx) -> octop::Status {
    OCTOP_ASSIGN_OR_RETURN(octop::SqlRows rows,
                           tx.Execute("SELECT name FROM example_users ORDER BY name", {}));
    if (rows.rows.size() != 1 || rows.rows[0][0] != "ada") return octop::InternalError("users are not [ada]");
    return octop::Status::Ok();
  });
  if (!users.ok()) return Fail(users.ToString());
  auto jobs = queue.ListJobs({.kind = "welcome"});
  if (!jobs.ok()) return Fail(jobs.status().ToString());
  if (jobs->size() != 1 || welcomed.load() != 1) return Fail("expected exactly one welcome job and run");
  std::cout << "one sign-up refused (no user, no job), one accepted: job " << *accepted << " ran\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: transactional-enqueue DATABASE_URL\n";
    return 2;
  }
  return Run(argv[1]) ? 0 : 1;
}
