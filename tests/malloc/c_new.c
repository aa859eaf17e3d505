/* A C program that calls operator new, as a C++ plugin's code would were no
 * C++ runtime loaded: the library serves it, and when it must fail there is
 * no runtime to throw std::bad_alloc, so the library ends the program with a
 * message (docs/bad_input.md). Run by run_preload.sh's c_runtime case.
 * Exit 77: no operator new in the process (run without the preload). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
    void* (*new_fn)(unsigned long);
    *(void**)&new_fn = dlsym(RTLD_DEFAULT, "_Znwm"); /* POSIX's way to a function pointer */
    if (!new_fn) {
        puts("SKIP: no operator new in this process");
        return 77;
    }
    char* p = new_fn(64);
    if (!p) return 2;
    p[0] = 1;
    p[63] = 2;
    printf("operator new(64) from C: a block\n");
    fflush(stdout);
    new_fn((unsigned long)1 << 46); /* 64 TiB: refused, and nothing can be thrown */
    puts("operator new(64 TiB) returned");
    return 3;
}
