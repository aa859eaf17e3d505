# shellcheck shell=bash
# Prerequisite checks shared by scripts/test and scripts/bench.
#
# Usage (from a script that has `set -euo pipefail`):
#   source scripts/lib/deps.sh
#   deps_check_build  <preset>   # compiler for the preset, cmake, ninja, Boost, Catch2
#   deps_check_bench             # + benchmark, jemalloc, mimalloc, gperftools, matplotlib, valgrind
#   deps_install_missing         # apt-get install (as root) or print the sudo command and exit 1
#
# Each check that fails records the Debian package that provides the missing
# piece. Set ALLOTHEQUE_DEPS_DRY_RUN=1 to print the apt-get commands instead of
# running them.

DEPS_MISSING_PKGS=()     # Debian packages to install
DEPS_PROBLEMS=()         # human-readable descriptions
DEPS_CXX=""              # compiler used for header probes

deps__log()  { printf '[deps] %s\n' "$*" >&2; }
deps__miss() { # <package> <description>
  local p
  for p in "${DEPS_MISSING_PKGS[@]}"; do [[ $p == "$1" ]] && { DEPS_PROBLEMS+=("$2"); return 0; }; done
  DEPS_MISSING_PKGS+=("$1")
  DEPS_PROBLEMS+=("$2")
}

# deps__version_ge <have> <want>: true when have >= want (dotted versions).
deps__version_ge() {
  [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

# Major.minor.patch of a compiler, or empty.
deps__cxx_version() {
  case "$1" in
    *clang*) "$1" --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9.]*\).*/\1/p' | head -n1 ;;
    *)       "$1" -dumpfullversion -dumpversion 2>/dev/null | head -n1 ;;
  esac
}

# deps__check_cxx <command> <min> <debian package>
deps__check_cxx() {
  local cxx=$1 min=$2 pkg=$3 v
  if ! command -v "$cxx" >/dev/null 2>&1; then
    deps__miss "$pkg" "$cxx not found (need >= $min)"
    return 1
  fi
  v=$(deps__cxx_version "$cxx")
  if [[ -z $v ]] || ! deps__version_ge "$v" "$min"; then
    deps__miss "$pkg" "$cxx is ${v:-of unknown version}, need >= $min"
    return 1
  fi
  deps__log "$cxx $v"
  return 0
}

# deps__probe_header <header>: 0 if the compiler finds it on its default path.
deps__probe_header() {
  local h=$1
  if [[ -n $DEPS_CXX ]]; then
    printf '#include <%s>\n' "$h" | "$DEPS_CXX" -x c++ -std=c++20 -fsyntax-only - >/dev/null 2>&1
  else
    [[ -f /usr/include/$h || -f /usr/local/include/$h ]]
  fi
}

# deps__check_header <header> <debian package> <description>
deps__check_header() {
  if deps__probe_header "$1"; then
    deps__log "found <$1>"
  else
    deps__miss "$2" "$3: header <$1> not found"
  fi
}

deps__check_cmd() { # <command> <debian package>
  if command -v "$1" >/dev/null 2>&1; then
    deps__log "found $1"
  else
    deps__miss "$2" "$1 not found"
  fi
}

deps__check_cmake() {
  local v
  if ! command -v cmake >/dev/null 2>&1; then
    deps__miss cmake "cmake not found (need >= 3.25)"
    return
  fi
  v=$(cmake --version | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p')
  if [[ -z $v ]] || ! deps__version_ge "$v" 3.25; then
    deps__miss cmake "cmake is ${v:-of unknown version}, need >= 3.25"
  else
    deps__log "cmake $v"
  fi
}

deps__check_boost() {
  local v=""
  if [[ -n $DEPS_CXX ]]; then
    v=$(printf '#include <boost/version.hpp>\nALLOTHEQUE_BOOST_VERSION=BOOST_VERSION\n' |
        "$DEPS_CXX" -x c++ -E -P - 2>/dev/null | sed -n 's/^ALLOTHEQUE_BOOST_VERSION=\([0-9]*\).*/\1/p') || v=""
  fi
  if [[ -z $v && -f /usr/include/boost/version.hpp ]]; then
    v=$(sed -n 's/^#define BOOST_VERSION \([0-9]*\).*/\1/p' /usr/include/boost/version.hpp)
  fi
  if [[ -z $v ]]; then
    deps__miss libboost-dev "Boost headers not found (need >= 1.74)"
  elif (( v < 107400 )); then
    deps__miss libboost-dev "Boost is $((v / 100000)).$((v / 100 % 1000)), need >= 1.74"
  else
    deps__log "Boost $((v / 100000)).$((v / 100 % 1000)).$((v % 100))"
  fi
}

deps__check_catch2() {
  if deps__probe_header catch2/catch_all.hpp; then
    deps__log "found Catch2 v3 <catch2/catch_all.hpp>"
  elif deps__probe_header catch2/catch.hpp; then
    deps__log "found Catch2 v2 <catch2/catch.hpp>"
  else
    deps__miss catch2 "Catch2 not found (<catch2/catch.hpp> or <catch2/catch_all.hpp>)"
  fi
}

# Build + test prerequisites for a preset. The compiler depends on the preset:
# clang-* presets use clang++ >= 14, all others g++ >= 12.
deps_check_build() {
  local preset=${1:-dev}
  case "$preset" in
    clang*) if deps__check_cxx clang++ 14 clang; then DEPS_CXX=clang++; fi ;;
    *)      if deps__check_cxx g++ 12 g++; then DEPS_CXX=g++; fi ;;
  esac
  deps__check_cmake
  deps__check_cmd ninja ninja-build
  deps__check_boost
  # The bench preset turns the tests off, so it does not need Catch2.
  if [[ $preset != bench ]]; then deps__check_catch2; fi
  # The trace summary symbolises call sites with addr2line (binutils), and
  # its HTML page is tested in a real browser (whole-suite presets only).
  deps__check_cmd addr2line binutils
  # The memcheck tests run a program under valgrind (whole-suite presets).
  case "$preset" in
    dev|clang-dev|release) deps_check_browser; deps__check_cmd valgrind valgrind ;;
  esac
  return 0
}

# Headless Chromium, ChromeDriver and Selenium for /usr/bin/python3.
deps_check_browser() {
  deps__check_cmd chromium chromium
  deps__check_cmd chromedriver chromium-driver
  if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import selenium' >/dev/null 2>&1; then
    deps__log "found /usr/bin/python3 with selenium"
  else
    deps__miss python3-selenium "/usr/bin/python3 with selenium not found"
  fi
}

# Extra prerequisites for the benchmarks and their driver (bench/run.py).
deps_check_bench() {
  deps__check_header benchmark/benchmark.h libbenchmark-dev "Google Benchmark"
  deps__check_header jemalloc/jemalloc.h   libjemalloc-dev  "jemalloc"
  deps__check_header mimalloc.h            libmimalloc-dev  "mimalloc"
  deps__check_header gperftools/tcmalloc.h libgoogle-perftools-dev "gperftools (tcmalloc)"
  deps__check_cmd pkg-config pkgconf
  deps__check_cmd valgrind valgrind
  if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1; then
    deps__log "found /usr/bin/python3 with matplotlib"
  else
    deps__miss python3-matplotlib "/usr/bin/python3 with matplotlib not found"
  fi
  return 0
}

deps__run() {
  if [[ ${ALLOTHEQUE_DEPS_DRY_RUN:-0} == 1 ]]; then
    printf '[deps] (dry run) %s\n' "$*" >&2
  else
    "$@"
  fi
}

# Install what the checks found missing (root), or explain how to (non-root).
deps_install_missing() {
  ((${#DEPS_MISSING_PKGS[@]} == 0)) && return 0
  local p
  for p in "${DEPS_PROBLEMS[@]}"; do deps__log "missing: $p"; done
  if [[ $(id -u) -ne 0 ]]; then
    echo "Missing prerequisites. Install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends ${DEPS_MISSING_PKGS[*]}" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "Missing prerequisites and apt-get is not available; install the equivalents of:" >&2
    echo "  ${DEPS_MISSING_PKGS[*]}" >&2
    exit 1
  fi
  deps__log "installing: ${DEPS_MISSING_PKGS[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [[ -z ${DEPS_APT_UPDATED:-} ]]; then
    deps__run apt-get update
    DEPS_APT_UPDATED=1
  fi
  deps__run apt-get install -y --no-install-recommends "${DEPS_MISSING_PKGS[@]}"
}

# Check, install if needed, then re-check (an installed-but-too-old package
# cannot be fixed by apt-get and must fail here, not later in the build).
# Usage: deps_ensure build <preset>   |   deps_ensure bench <preset>
deps_ensure() {
  local what=$1 preset=${2:-dev} attempt
  for attempt in 1 2; do
    DEPS_MISSING_PKGS=(); DEPS_PROBLEMS=(); DEPS_CXX=""
    deps_check_build "$preset"
    if [[ $what == bench ]]; then deps_check_bench; fi
    ((${#DEPS_MISSING_PKGS[@]} == 0)) && return 0
    if ((attempt == 1)); then
      deps_install_missing
      [[ ${ALLOTHEQUE_DEPS_DRY_RUN:-0} == 1 ]] && return 0
    fi
  done
  local p
  for p in "${DEPS_PROBLEMS[@]}"; do deps__log "still missing: $p"; done
  echo "Prerequisites are still not satisfied after installing: ${DEPS_MISSING_PKGS[*]}" >&2
  exit 1
}
