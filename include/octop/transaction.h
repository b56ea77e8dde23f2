// Transaction: one transaction of the job queue's database, opened by JobQueue::WithTransaction on one
// connection for the duration of a callback. The caller's own statements and the jobs it enqueues commit or
// roll back together (transactional enqueue, docs/jobs.md): a job exists if and only if the caller's writes
// do.
//
// Thread-safety: used by the callback's thread only; must not outlive the callback.
#ifndef OCTOP_TRANSACTION_H_
#define OCTOP_TRANSACTION_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <octop/job.h>
#include <octop/status.h>

namespace octop {

// What a statement run through Transaction::Execute returns: every value as text (SQL NULL = nullopt).
struct SqlRows {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
  long affected_rows = 0;  // INSERT/UPDATE/DELETE
};

class Transaction {
 public:
  virtual ~Transaction() = default;
  // One statement of the caller's SQL, parameters bound, never interpolated. Placeholders $1, $2, ... work on
  // both backends (SQLite also takes ?). Unqualified tables are the job queue's namespace's (PostgreSQL:
  // search_path is its schema). A failed statement fails the transaction: it then rolls back whatever the
  // callback returns.
  virtual Result<SqlRows> Execute(std::string_view sql,
                                  const std::vector<std::optional<std::string>>& params) = 0;
  // Enqueues inside this transaction, all or nothing as JobQueue::EnqueueMany; workers everywhere are woken
  // only when it commits.
  virtual Result<std::vector<EnqueueResult>> EnqueueJobs(const std::vector<JobSpec>& jobs) = 0;
  // "sqlite" or "postgres": which SQL dialect Execute speaks.
  virtual std::string_view backend() const = 0;
};

}  // namespace octop

#endif  // OCTOP_TRANSACTION_H_
