// A heap per thread in a thread pool: `layers::per_thread<H>` gives each
// worker its own H, created at the worker's first allocation and used without
// a lock. Blocks may be freed on any thread: a free on another thread goes onto
// the owner's lock-free list, and the owner takes them back at its next
// allocation (or when collect_all() is called with the threads stopped).
//
// Here producer tasks build lists on whichever worker runs them, consumer
// tasks (on any worker) sum and destroy them, and the main thread, which never
// allocates, destroys the rest: frees cross threads both ways. The program
// checks the sums, that frees did cross threads, that the registry holds no
// more heaps than workers, and, once the pool has stopped, that every byte
// came back (the stats layer under per_thread counts each heap's live bytes).
#include <allotheque/allotheque.hpp>

#include "../support/checks.hpp"

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace al = allotheque;
namespace ly = allotheque::layers;

using shared_heap = ly::per_thread<ly::stats<al::segregated_heap<>>>;
using batch = std::list<std::uint64_t, al::allocator<std::uint64_t, shared_heap>>;

// The smallest useful pool: a queue of tasks and N workers.
class thread_pool {
public:
    explicit thread_pool(unsigned n) {
        for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
    }
    ~thread_pool() {
        {
            std::lock_guard g(lock_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (std::thread& t : workers_) t.join();
    }
    void submit(std::function<void()> task) {
        {
            std::lock_guard g(lock_);
            tasks_.push_back(std::move(task));
        }
        wake_.notify_one();
    }

private:
    void work() {
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock g(lock_);
                wake_.wait(g, [this] { return stopping_ || !tasks_.empty(); });
                if (tasks_.empty()) return;   // stopping, and nothing left to do
                task = std::move(tasks_.front());
                tasks_.pop_front();
            }
            task();
        }
    }
    std::mutex lock_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> tasks_;
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

int main() {
    examples::checks expect;
    constexpr unsigned workers = 4;
    constexpr std::uint64_t batches = 64, per_batch = 2'000;

    shared_heap heap;   // outlives the pool and every block
    std::mutex done_lock;
    std::vector<std::unique_ptr<batch>> kept;   // for the main thread to destroy
    std::uint64_t consumed_sum = 0;
    {
        thread_pool pool(workers);
        for (std::uint64_t b = 0; b < batches; ++b)
            pool.submit([&, b] {
                // Producer: a list built on this worker's heap.
                auto xs = std::make_unique<batch>(al::allocator<std::uint64_t, shared_heap>(heap));
                for (std::uint64_t i = 0; i < per_batch; ++i) xs->push_back(b * per_batch + i);
                if (b % 2 == 1) {   // the main thread destroys the odd batches
                    std::lock_guard g(done_lock);
                    kept.push_back(std::move(xs));
                    return;
                }
                // Consumer, as another task, on whichever worker takes it.
                std::shared_ptr<batch> shared(std::move(xs));
                pool.submit([&, shared] {
                    std::uint64_t s = 0;
                    for (std::uint64_t v : *shared) s += v;
                    shared->clear();   // nodes freed here, possibly on another worker
                    std::lock_guard g(done_lock);
                    consumed_sum += s;
                });
            });
    }   // the pool drains its queue and joins: the workers' heaps are orphaned, not destroyed

    std::uint64_t kept_sum = 0;
    for (auto& xs : kept)
        for (std::uint64_t v : *xs) kept_sum += v;
    const std::size_t remote_before = heap.remote_frees();
    kept.clear();   // every node freed by a thread that never allocated
    const std::size_t crossed_by_main = heap.remote_frees() - remote_before;

    const std::uint64_t n = batches * per_batch;
    expect(consumed_sum + kept_sum == n * (n - 1) / 2, "every value summed once");
    expect(crossed_by_main == (batches / 2) * per_batch, "each node the main thread freed went to its owner's list");
    expect(heap.heap_count() >= 1 && heap.heap_count() <= workers, "at most one heap per worker");

    heap.collect_all();   // quiescent now: the owners' lists back into their heaps
    std::size_t live = 0, allocations = 0;
    heap.for_each_heap([&](const auto& h) {
        live += h.stats().live_bytes;
        allocations += h.stats().allocations;
    });
    expect(live == 0, "every byte is back in the heap that gave it");

    std::printf("%u workers, %zu heaps, %zu allocations, %zu frees crossed threads (%zu by the main thread); "
                "all values summed, nothing live after collect_all\n",
                workers, heap.heap_count(), allocations, heap.remote_frees(), crossed_by_main);
    return expect.status();
}
