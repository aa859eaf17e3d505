// The program recorded by examples/record (see README.md there): an ordinary
// C++ program on the system malloc, with the allocation pattern the
// allotheque heaps are for — many small node-based objects of a few sizes —
// and a check of its own result (exit 1 if wrong), so a recording that broke
// the program would show.
//
// Usage: record_workload [ROUNDS]   (default 20)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <string>
#include <unordered_map>

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
    if (rounds <= 0) {
        std::fprintf(stderr, "usage: record_workload [ROUNDS > 0]\n");
        return 2;
    }
    std::uint64_t checksum = 0, expected = 0;
    for (int round = 0; round < rounds; ++round) {
        std::map<std::uint64_t, std::string> index;        // tree nodes + heap strings
        std::list<std::uint64_t> queue;                    // list nodes
        std::unordered_map<std::uint64_t, std::uint64_t> counts;
        for (std::uint64_t i = 0; i < 5'000; ++i) {
            const std::uint64_t key = (i * 2'654'435'761u) % 100'003;
            index.emplace(key, std::string(16 + key % 48, static_cast<char>('a' + key % 26)));
            queue.push_back(key);
            ++counts[key % 1'000];
            if (queue.size() > 500) queue.pop_front();     // short-lived nodes
        }
        for (const auto& [key, text] : index) checksum += key * text.size();
        for (std::uint64_t i = 0; i < 5'000; ++i) {
            const std::uint64_t key = (i * 2'654'435'761u) % 100'003;
            expected += key * (16 + key % 48);
        }
    }
    std::printf("record_workload: %d rounds, checksum %llu\n", rounds, static_cast<unsigned long long>(checksum));
    return checksum == expected ? 0 : 1;
}
