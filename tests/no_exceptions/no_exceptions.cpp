// The library's heaps in a program built with -fno-exceptions (games and
// embedded code often are; so are the shipped malloc libraries). A plain
// program, since Catch2 needs exceptions. Checked:
//   - the Velox and Medius heaps (those with mapped class tables) serve and
//     take back blocks whose contents stay intact;
//   - try_allocate answers an impossible request with nullptr;
//   - allocate, which would throw bad_alloc, ends the program with SIGABRT
//     (detail/bad_alloc.hpp), and so does a class table that cannot be
//     mapped while a heap is built (detail/mapped_array.hpp).
#if __cpp_exceptions
#error "this test must be built with -fno-exceptions"
#endif

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <allotheque/allocators/medius.hpp>
#include <allotheque/allocators/velox.hpp>

namespace {

[[noreturn]] void fail(const char* what, const char* heap) {
    std::fprintf(stderr, "FAIL: %s: %s\n", heap, what);
    std::exit(1);
}

// The child's fate: exit 0 from `body` is a failure, SIGABRT the expected end.
template <class F>
void expect_abort(const char* what, const char* heap, F body) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) fail("fork failed", heap);
    if (pid == 0) {
        body();
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) fail("waitpid failed", heap);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) fail(what, heap);
    std::printf("%s: %s: SIGABRT\n", heap, what);
}

unsigned char pattern(const void* p, std::size_t i) {
    return static_cast<unsigned char>((reinterpret_cast<std::uintptr_t>(p) >> 4) + i);
}

template <class Heap>
void exercise(const char* name) {
    using allotheque::request;
    auto* heap = new Heap();
    constexpr int count = 2000;
    static void* blocks[count];
    static std::size_t sizes[count];
    std::uint64_t x = 88172645463325252ULL;
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < count; ++i) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sizes[i] = 1 + x % 2000;
            blocks[i] = heap->allocate(request{sizes[i], i ? blocks[i - 1] : nullptr});
            for (std::size_t b = 0; b < sizes[i]; ++b) static_cast<unsigned char*>(blocks[i])[b] = pattern(blocks[i], b);
        }
        for (int i = 0; i < count; ++i) {
            for (std::size_t b = 0; b < sizes[i]; ++b)
                if (static_cast<unsigned char*>(blocks[i])[b] != pattern(blocks[i], b)) fail("a block's contents changed", name);
            heap->deallocate(blocks[i], request{sizes[i]});
        }
    }
    if (heap->try_allocate(request{SIZE_MAX / 2}) != nullptr) fail("try_allocate(SIZE_MAX / 2) returned a block", name);
    std::printf("%s: %d blocks in 3 rounds intact; try_allocate(SIZE_MAX / 2): nullptr\n", name, count);

    expect_abort("allocate(SIZE_MAX / 2)", name, [heap] { (void)heap->allocate(request{SIZE_MAX / 2}); });
    delete heap;

    // The heap's room is taken first: only its own tables meet the limit.
    void* room = ::operator new(sizeof(Heap));
    expect_abort("a heap built with no address space left", name, [room] {
        char buf[4096];
        long vm_kib = -1;
        if (FILE* f = std::fopen("/proc/self/status", "r")) {
            while (std::fgets(buf, sizeof buf, f))
                if (std::strncmp(buf, "VmSize:", 7) == 0) vm_kib = std::atol(buf + 7);
            std::fclose(f);
        }
        if (vm_kib < 0) _exit(2);
        rlimit rl{};
        if (getrlimit(RLIMIT_AS, &rl) != 0) _exit(2);
        rl.rlim_cur = static_cast<rlim_t>(vm_kib) * 1024;
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(2);
        ::new (room) Heap();
    });
    ::operator delete(room);
}

} // namespace

int main() {
    exercise<allotheque::velox_heap<>>("velox_heap");
    exercise<allotheque::medius_heap<>>("medius_heap");
    std::printf("OK\n");
    return 0;
}
