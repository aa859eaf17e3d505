// Runs a program and captures its output: what the replay driver does with
// its workers and the symboliser with addr2line. posix_spawn, not a shell: no
// quoting, and nothing of the parent's (a 100-MB trace, say) is copied.
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace allotheque::tools {

struct spawn_result {
    bool started = false;
    int status = -1;  // exit status, or 128 + signal
    std::string out;  // stdout (and stderr when merged); why it did not start otherwise
};

// argv[0] is looked up on PATH when `search_path`. `stdin_fd` (-1: inherited)
// becomes the child's stdin; stderr joins stdout when `merge_stderr`, else it
// goes to /dev/null.
inline spawn_result spawn_capture(const std::vector<std::string>& args, char* const* envp, int stdin_fd = -1,
                                  bool merge_stderr = true, bool search_path = false) {
    spawn_result r;
    std::vector<std::string> store(args);
    std::vector<char*> argv;
    for (auto& s : store) argv.push_back(s.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        r.out = std::string("pipe: ") + std::strerror(errno);
        return r;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    if (merge_stderr) posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    else posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = search_path ? ::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp)
                               : ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        r.out = "cannot run " + args[0] + ": " + std::strerror(rc);
        return r;
    }
    r.started = true;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        r.out.append(buf, std::size_t(n));
    }
    ::close(fds[0]);
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    return r;
}

} // namespace allotheque::tools
