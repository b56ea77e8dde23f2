// octop-exec: the process octopd puts between itself and every command it runs, so that no process of a run
// outlives octopd or the run (docs/reliability.md, "No run outlives its node").
//
//   octop-exec <parent-pid> -- program [args...]
//
// It becomes a child subreaper (processes its command leaves behind, even ones that called setsid, become its
// children), asks the kernel for SIGUSR1 when octopd dies (PR_SET_PDEATHSIG, which `kill -9` cannot skip),
// and runs the program in its own process group, which it shares. When the program ends, or octopd dies, it
// kills every process left in the group and every descendant reparented to it, then exits with the
// program's status (or dies of the program's signal). SIGTERM, SIGINT and SIGHUP sent to the group by
// octopd's stop reach the program; the shim itself waits for the program to end.
//
// Written by hand: it is a few system calls that no library wraps (docs/decisions.md).
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

// The pids listed in /proc/self/task/*/children: this process's children, reparented orphans included.
std::vector<pid_t> Children() {
  std::vector<pid_t> out;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return out;
  while (const dirent* task = ::readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    const std::string path = std::string("/proc/self/task/") + task->d_name + "/children";
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      long pid = 0;
      while (std::fscanf(f, "%ld", &pid) == 1) out.push_back(static_cast<pid_t>(pid));
      std::fclose(f);
    }
  }
  ::closedir(tasks);
  return out;
}

// Every process in our group but us, found in /proc (kill(-pgid) would end this process too).
std::vector<pid_t> GroupMembers() {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  const pid_t group = ::getpgrp();
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid == self) continue;
    const std::string path = std::string("/proc/") + entry->d_name + "/stat";
    FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) continue;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so parse after the last ')'.
    const char* close = std::strrchr(buf, ')');
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (close != nullptr && std::sscanf(close + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3 &&
        pgrp == group) {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(proc);
  return out;
}

// Kills what the run left and reaps our children, until none is left (bounded: a process that cannot be
// killed is not waited for forever).
void KillEverything() {
  for (int round = 0; round < 200; ++round) {
    bool any = false;
    for (pid_t pid : GroupMembers()) any = ::kill(pid, SIGKILL) == 0 || any;
    for (pid_t pid : Children()) any = ::kill(pid, SIGKILL) == 0 || any;
    while (::waitpid(-1, nullptr, WNOHANG) > 0) any = true;
    if (!any) return;
    ::usleep(5000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: octop-exec <parent-pid> -- program [args...]\n");
    return 127;
  }
  const pid_t parent = static_cast<pid_t>(std::strtol(argv[1], nullptr, 10));
  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGUSR1, SIGTERM, SIGINT, SIGHUP}) sigaddset(&handled, s);
  sigset_t original;
  ::sigprocmask(SIG_BLOCK, &handled, &original);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_PDEATHSIG, SIGUSR1);
  if (::getppid() != parent) return 127;  // octopd died before the death signal was armed

  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "octop-exec: fork: %s\n", std::strerror(errno));
    return 127;
  }
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &original, nullptr);
    ::execvp(argv[3], argv + 3);
    std::fprintf(stderr, "octop-exec: cannot run '%s': %s\n", argv[3], std::strerror(errno));
    ::_exit(127);
  }

  int status = 0;
  for (;;) {
    siginfo_t info{};
    const int sig = ::sigwaitinfo(&handled, &info);
    if (sig == SIGUSR1) {  // octopd died: nothing of this run may go on
      KillEverything();
      return 137;
    }
    if (sig != SIGCHLD) continue;  // SIGTERM & co. reached the program through the group
    bool done = false;
    for (pid_t r; (r = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      if (r == child) {
        done = true;
        break;
      }
    }
    if (done) break;
  }
  KillEverything();
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    std::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}
