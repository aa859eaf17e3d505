// Runs a piece of a test that must abort in a forked child, so the test can
// check the signal and the message instead of dying with it.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <utility>

#include "catch.hpp"

namespace allotheque_test {

// Returns {terminated by SIGABRT, what the child wrote on stderr}.
template <class F>
std::pair<bool, std::string> in_child(F f) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        ::dup2(fds[1], 2);
        std::signal(SIGABRT, SIG_DFL);   // not Catch's handler: the parent checks the signal
        f();
        std::_Exit(0);   // reached only when nothing was detected
    }
    ::close(fds[1]);
    std::string err;
    char buf[512];
    for (ssize_t k; (k = ::read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(k));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return {WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, err};
}

// Runs f in a forked child, which ends with ::_exit(status) (returning from
// f exits 0), for a test that changes the whole process (an address-space
// limit, fresh arenas). Returns the exit status, or -1 when the child did not
// exit (a signal).
template <class F>
int exit_status_in_child(F f) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        f();
        std::_Exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace allotheque_test
