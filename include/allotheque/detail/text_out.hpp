// Text for standard error or a FILE, formatted without allocating: the malloc
// prints its options and statistics with it, where printf could call malloc
// (and, at start-up, before the malloc is ready). Output is buffered on the
// stack and written when the buffer fills and at the end.
#pragma once
#include <stdio.h>

#include <cstddef>

#include <allotheque/detail/fail.hpp>

namespace allotheque::detail {

class text_out {
public:
    explicit text_out(int fd) noexcept : fd_(fd) {}
    explicit text_out(FILE* f) noexcept : file_(f) {}
    text_out(const text_out&) = delete;
    text_out& operator=(const text_out&) = delete;
    ~text_out() { flush(); }

    text_out& operator<<(const char* s) noexcept {
        while (*s) put(*s++);
        return *this;
    }
    text_out& operator<<(std::size_t v) noexcept {
        char d[20];
        int k = 0;
        do {
            d[k++] = static_cast<char>('0' + v % 10);
            v /= 10;
        } while (v);
        while (k) put(d[--k]);
        return *this;
    }
    text_out& operator<<(unsigned v) noexcept { return *this << static_cast<std::size_t>(v); }
    text_out& operator<<(int v) noexcept {
        if (v < 0) put('-');
        return *this << static_cast<std::size_t>(v < 0 ? -static_cast<long long>(v) : v);
    }

    void flush() noexcept {
        if (file_) {
            if (n_) ::fwrite(buf_, 1, n_, file_);
        } else {
            write_all(fd_, buf_, n_);
        }
        n_ = 0;
    }

private:
    void put(char c) noexcept {
        if (n_ == sizeof buf_) flush();
        buf_[n_++] = c;
    }

    char buf_[1024];
    std::size_t n_ = 0;
    int fd_ = 2;
    FILE* file_ = nullptr;
};

} // namespace allotheque::detail
