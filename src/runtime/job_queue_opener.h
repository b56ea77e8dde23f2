// JobQueueOpener: opens a JobQueue on a store the caller supplies instead of the one JobQueue::Open would
// open from the options' database_url -- a fresh namespace per test, a store with faults injected, a
// benchmark's pool size. Internal: the public API names no store type.
//
// Thread-safety: Open may be called from any thread; the factory is called once, on the calling thread.
#ifndef OCTOP_RUNTIME_JOB_QUEUE_OPENER_H_
#define OCTOP_RUNTIME_JOB_QUEUE_OPENER_H_

#include <functional>
#include <memory>

#include <octop/clock.h>
#include <octop/queue.h>
#include <octop/status.h>

#include "store/job_store.h"

namespace octop::runtime {

// Opens the queue's store with the queue's clock (the database "now" override of tests).
using JobStoreFactory = std::function<Result<std::unique_ptr<store::JobStore>>(const Clock& clock)>;

struct JobQueueOpener {
  // JobQueue::Open with the store `factory` opens (migrated by the queue, as Open does).
  static Result<std::unique_ptr<JobQueue>> Open(JobQueueOptions options, const JobStoreFactory& factory);
};

}  // namespace octop::runtime

#endif  // OCTOP_RUNTIME_JOB_QUEUE_OPENER_H_
