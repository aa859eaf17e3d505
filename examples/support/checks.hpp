// The self-check the examples end with: each failed expectation is printed,
// and the count becomes the exit status, so a ctest running an example fails
// exactly when one of its checks does.
#pragma once
#include <cstdio>

namespace examples {

class checks {
public:
    void operator()(bool ok, const char* what) noexcept {
        if (ok) return;
        std::printf("FAIL: %s\n", what);
        ++failures_;
    }
    // "ok" or "FAIL" on the last line, and the status for main to return.
    int status() const noexcept {
        std::puts(failures_ == 0 ? "ok" : "FAIL");
        return failures_ == 0 ? 0 : 1;
    }

private:
    int failures_ = 0;
};

} // namespace examples
