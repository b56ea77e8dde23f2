#include "run_log_checks.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace octop::chaos {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Tolerance for comparing two clock_timestamp() readings taken in different statements of one server.
constexpr double kEpsilon = 1e-6;

std::string Describe(const Run& r) {
  std::ostringstream out;
  out.precision(3);
  out << std::fixed << r.kind << " " << r.key << " run " << r.run_id << " on " << r.node;
  if (r.kind == "job") out << " attempt " << r.attempt;
  out << " [" << r.start << ", ";
  if (r.end) {
    out << *r.end;
  } else {
    out << "no end";
  }
  out << "]";
  return out.str();
}

struct Ticket {
  std::string task;
  std::string claimer;
  double claimed_at = 0;
  double expires = kInfinity;
  std::optional<double> cleared_at;
  bool released = false;  // cleared by a release, not by the janitor
};

std::map<std::string, std::vector<const Run*>> ByKey(const std::vector<Run>& runs, const std::string& kind) {
  std::map<std::string, std::vector<const Run*>> by_key;
  for (const Run& r : runs) {
    if (r.kind == kind) by_key[r.key].push_back(&r);
  }
  for (auto& [key, list] : by_key) {
    std::sort(list.begin(), list.end(), [](const Run* a, const Run* b) { return a->start < b->start; });
  }
  return by_key;
}

}  // namespace

std::vector<Run> PairRuns(const std::vector<RunLogRow>& rows) {
  std::map<std::string, Run> by_id;
  std::vector<std::string> order;
  for (const RunLogRow& row : rows) {
    auto [it, inserted] = by_id.try_emplace(row.run_id);
    Run& r = it->second;
    if (inserted) order.push_back(row.run_id);
    r.kind = row.kind;
    r.key = row.key;
    r.node = row.node;
    r.run_id = row.run_id;
    r.attempt = row.attempt;
    if (row.event == "start") {
      r.start = row.at;
    } else {
      r.end = row.at;
      r.result = row.detail;
    }
  }
  std::vector<Run> runs;
  runs.reserve(order.size());
  for (const std::string& id : order) {
    Run& r = by_id[id];
    if (r.start == 0 && r.end) {
      r.start = *r.end;
      r.has_start = false;
    }
    runs.push_back(r);
  }
  return runs;
}

void CheckTasks(const std::vector<Run>& logged_runs, const std::vector<TaskAudit>& audit,
                CheckReport& report) {
  std::map<std::string, Ticket> tickets;
  for (const TaskAudit& a : audit) {
    if (!a.old_ticket && a.new_ticket) {
      if (tickets.contains(*a.new_ticket)) {
        report.violations.push_back("task " + a.task + ": ticket " + *a.new_ticket + " claimed twice");
        continue;
      }
      tickets[*a.new_ticket] = Ticket{.task = a.task,
                                      .claimer = a.app,
                                      .claimed_at = a.at,
                                      .expires = a.new_expires.value_or(kInfinity),
                                      .cleared_at = std::nullopt,
                                      .released = false};
      ++report.task_claims;
    } else if (a.old_ticket && !a.new_ticket) {
      auto it = tickets.find(*a.old_ticket);
      if (it == tickets.end()) {
        report.violations.push_back("task " + a.task + ": ticket " + *a.old_ticket + " cleared by " + a.app +
                                    " but never claimed");
        continue;
      }
      Ticket& t = it->second;
      if (t.cleared_at) {
        report.violations.push_back("task " + a.task + ": ticket " + *a.old_ticket + " cleared twice");
        continue;
      }
      t.cleared_at = a.at;
      t.released = a.ended_changed;
      if (a.ended_changed && a.app != t.claimer) {
        report.violations.push_back("task " + a.task + ": ticket " + *a.old_ticket + " of " + t.claimer +
                                    " released by " + a.app + " (fencing broken)");
      }
      if (!a.ended_changed) {
        ++report.tickets_swept;
        if (a.at + kEpsilon < t.expires) {
          report.violations.push_back("task " + a.task + ": ticket " + *a.old_ticket + " of " + t.claimer +
                                      " cleared by " + a.app + " before its expiry, without a release");
        }
      }
    } else if (a.old_ticket && a.new_ticket) {
      report.violations.push_back("task " + a.task + ": ticket " + *a.old_ticket + " replaced by " +
                                  *a.new_ticket + " without being cleared (by " + a.app + ")");
    }
  }

  // The claim behind each run: the latest claim of that task by that node at or before the run's start.
  std::vector<Run> runs;
  for (const Run& r : logged_runs) {
    if (r.kind == "task") runs.push_back(r);
  }
  std::map<const Run*, const Ticket*> claim_of;
  for (Run& r : runs) {
    ++report.task_runs;
    const Ticket* best = nullptr;
    for (const auto& [id, t] : tickets) {
      if (t.task == r.key && t.claimer == r.node && t.claimed_at <= r.start + kEpsilon &&
          (best == nullptr || t.claimed_at > best->claimed_at)) {
        best = &t;
      }
    }
    if (best == nullptr) {
      report.violations.push_back(Describe(r) + ": no claim by its node before it started");
    } else {
      claim_of[&r] = best;
      if (!r.has_start) r.start = best->claimed_at;
    }
  }

  // A run without an end row ended at the latest when its ticket was cleared: by its release, or by the
  // janitor's sweep once its node was killed (octop-exec ends a killed node's commands; a command that
  // survived would have written its end row, which then counts instead).
  auto end_of = [&claim_of](const Run& r) {
    if (r.end) return *r.end;
    auto it = claim_of.find(&r);
    if (it != claim_of.end() && it->second->cleared_at) return *it->second->cleared_at;
    return kInfinity;
  };
  for (const auto& [key, list] : ByKey(runs, "task")) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Run& earlier = *list[i];
      const double earlier_end = end_of(earlier);
      for (std::size_t j = i + 1; j < list.size() && list[j]->start < earlier_end; ++j) {
        const Run& later = *list[j];
        auto it = claim_of.find(&earlier);
        const Ticket* t = it == claim_of.end() ? nullptr : it->second;
        const bool reclaimed = t != nullptr && t->cleared_at && !t->released &&
                               *t->cleared_at <= later.start + kEpsilon &&
                               t->expires <= *t->cleared_at + kEpsilon;
        if (!reclaimed) {
          report.violations.push_back("overlap: " + Describe(later) + " started while " + Describe(earlier) +
                                      " was running and its ticket had not expired and been reclaimed");
          continue;
        }
        ++report.allowed_overlaps;
        report.max_overlap_s = std::max(report.max_overlap_s,
                                        std::min(earlier_end, later.end.value_or(kInfinity)) - later.start);
      }
    }
  }
}

void CheckJobs(const std::vector<Run>& logged_runs, const std::vector<JobAudit>& audit,
               const std::vector<JobInfo>& jobs, const std::vector<std::string>& enqueued_ids,
               CheckReport& report) {
  std::map<std::string, const JobInfo*> by_id;
  for (const JobInfo& j : jobs) {
    by_id[j.id] = &j;
    ++report.jobs;
    if (j.status == "success") {
      ++report.jobs_success;
    } else if (j.status == "frozen") {
      ++report.jobs_frozen;
    } else {
      report.violations.push_back("job " + j.id + " ended the test " + j.status + " (attempt " +
                                  std::to_string(j.attempt) + "), not final");
    }
    if (j.attempt > j.max_retries + 1) {
      report.violations.push_back("job " + j.id + " made " + std::to_string(j.attempt) +
                                  " attempts with max_retries " + std::to_string(j.max_retries));
    }
    if (j.attempt > 1) report.retries += j.attempt - 1;
  }
  for (const std::string& id : enqueued_ids) {
    if (!by_id.contains(id))
      report.violations.push_back("job " + id + " was enqueued (201) and is gone: lost");
  }

  // Attempts from the audit: who claimed each (job, token), until when, and when the claimer ended it. A
  // token is one per claim statement, so the jobs of one claim share it: the job is part of the key. A
  // released claim (prefetched, never started) ends by its claimer and its attempt number is claimed again.
  struct Attempt {
    std::string job;
    int number = 0;
    std::string claimer;
    double claimed_at = 0;
    double expires = kInfinity;
    bool ended = false;
    std::optional<double> ended_by_claimer_at;
    std::optional<double> rescued_at;  // ended by another node's rescuer, after its expiry
  };
  std::map<std::pair<std::string, std::string>, Attempt> attempts;
  // Per (job, attempt number): the claims of it that their claimer handed back (a release undoes the claim:
  // the attempt goes back down by one). A prefetched claim is handed back unrun; a run interrupted by its
  // node's shutdown is handed back after it started (docs/jobs.md, "Shutdown"), so that number runs again.
  std::map<std::pair<std::string, int>, int> handed_back;
  for (const JobAudit& a : audit) {
    if (a.new_status == "running" && a.new_token && a.new_token != a.old_token) {
      attempts[{a.job, *a.new_token}] = Attempt{.job = a.job,
                                                .number = a.new_attempt,
                                                .claimer = a.app,
                                                .claimed_at = a.at,
                                                .expires = a.new_expires.value_or(kInfinity),
                                                .ended = false,
                                                .ended_by_claimer_at = std::nullopt,
                                                .rescued_at = std::nullopt};
    }
    if (a.old_status != "running" || a.new_status == "running") continue;
    if (!a.old_token) {
      report.violations.push_back("job " + a.job + ": a running attempt without a token ended");
      continue;
    }
    auto it = attempts.find({a.job, *a.old_token});
    if (it == attempts.end()) {
      report.violations.push_back("job " + a.job + ": attempt " + *a.old_token + " ended by " + a.app +
                                  " was never claimed");
      continue;
    }
    Attempt& at = it->second;
    if (at.ended) report.violations.push_back("job " + a.job + ": attempt " + *a.old_token + " ended twice");
    at.ended = true;
    if (a.app == at.claimer) {
      at.ended_by_claimer_at = a.at;
      if (a.new_attempt == at.number - 1) ++handed_back[{a.job, at.number}];
      continue;
    }
    if (a.new_error.find("worker lost") != std::string::npos && a.at + kEpsilon >= at.expires) {
      ++report.jobs_rescued;
      at.rescued_at = a.at;
    } else {
      report.violations.push_back("job " + a.job + ": attempt " + *a.old_token + " of " + at.claimer +
                                  " ended " + a.new_status + " by " + a.app +
                                  " (not its claimer, not a rescue after expiry): fencing broken");
    }
  }
  // The run of an attempt number is that of its latest claim (an earlier one of the same number was released
  // before it ran). A run without a start row started at that claim; one without an end row ended at the
  // latest when its claimer completed the attempt, or, when its node was killed, at the rescue: octop-exec
  // ends a killed node's commands (docs/reliability.md, "No run outlives its node"), and a command that
  // survived would have written its end row, which then counts instead.
  std::map<std::pair<std::string, int>, const Attempt*> latest;
  for (const auto& [key, at] : attempts) {
    const Attempt*& slot = latest[{at.job, at.number}];
    if (slot == nullptr || at.claimed_at > slot->claimed_at) slot = &at;
  }
  std::vector<Run> runs;
  for (const Run& r : logged_runs) {
    if (r.kind != "job") continue;
    runs.push_back(r);
    auto it = latest.find({r.key, r.attempt});
    if (!r.has_start && it != latest.end()) runs.back().start = it->second->claimed_at;
  }
  auto end_of = [&latest](const Run& r) {
    if (r.end) return *r.end;
    auto it = latest.find({r.key, r.attempt});
    if (it == latest.end()) return kInfinity;
    if (it->second->ended_by_claimer_at) return *it->second->ended_by_claimer_at;
    return it->second->rescued_at.value_or(kInfinity);
  };

  for (const auto& [key, list] : ByKey(runs, "job")) {
    report.job_runs += static_cast<int>(list.size());
    auto row = by_id.find(key);
    if (row == by_id.end()) {
      report.violations.push_back("job " + key + " ran but has no row");
      continue;
    }
    const JobInfo& job = *row->second;
    std::map<int, int> seen;
    bool final_attempt_ok = false;
    for (const Run* r : list) {
      const auto back = handed_back.find({key, r->attempt});
      if (++seen[r->attempt] > 1 + (back == handed_back.end() ? 0 : back->second)) {
        report.violations.push_back(Describe(*r) + ": a second run of the same attempt");
      }
      if (r->attempt > job.max_retries + 1 || r->attempt < 1) {
        report.violations.push_back(Describe(*r) + ": attempt beyond 1 + max_retries (" +
                                    std::to_string(job.max_retries) + ")");
      }
      if (r->attempt == job.attempt && r->result == "ok") final_attempt_ok = true;
    }
    if (job.status == "success" && !final_attempt_ok) {
      report.violations.push_back("job " + key + " is success at attempt " + std::to_string(job.attempt) +
                                  " but no run of that attempt ended ok");
    }
    for (std::size_t i = 0; i + 1 < list.size(); ++i) {
      const double end = end_of(*list[i]);
      for (std::size_t j = i + 1; j < list.size() && list[j]->start < end; ++j) {
        report.violations.push_back("job overlap: " + Describe(*list[j]) + " started while " +
                                    Describe(*list[i]) + " was running");
      }
    }
  }
}

}  // namespace octop::chaos
