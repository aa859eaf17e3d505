// expect-first: size_ways: Hash must have exact, bounded size classes
// A page's sizes in tagged ways need a bounded set of classes: a tag is one
// byte, and the search keeps per class a front and a bound. spaced_classes
// without MaxSize runs to 2^64.
#include <allotheque/allotheque.hpp>

namespace al = allotheque;
using ways = al::size_ways<al::spaced_classes<16, 128, 4>>;
ways::header_type h;
