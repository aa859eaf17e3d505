// Olden health: simulation of the Colombian health-care system (Lomow et al.).
//
// Villages form a 4-ary tree; each village has a hospital whose staff grows
// with the village's level (2^(level-1), leaves have level 1). Every time step,
// bottom-up: a village takes in the patients its children referred up, then
//   - patients "inside" (being treated) count down; when done they free a
//     member of staff and go to the village's "returned" list;
//   - patients being "assessed" count down; when done they are treated here
//     (90 %, or always at the root) and move "inside" for 10 steps, or are
//     referred to the parent village ("up" list) and free their staff;
//   - "waiting" patients get a free member of staff and move to "assess" for
//     3 steps, or else wait one more step;
//   - with probability 1/3 a new patient arrives.
// Lists are doubly linked with a sentinel head embedded in the village; as in
// the original, appending walks to the tail and removal searches the list for
// the patient, so the waiting lists (which grow without bound at the leaves)
// are traversed over and over.
//
// Allocation: villages (hint: parent; the root has none); patients (hint:
// their home village); list elements (hint: predecessor, the sentinel inside
// the village when the list is empty). Moving a patient frees its list
// element and allocates a new one at the tail of the destination list.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

#include "objects.hpp"
#include "../common/policy.hpp"
#include "rng.hpp"
#include "scale.hpp"

namespace bench::olden {

namespace health_impl {

struct village;

struct patient {
    int hosps_visited;
    int time;        // total time spent in hospitals
    int time_left;   // of the current stage
    village* home;
};

struct list_elem {
    patient* p;
    list_elem* forward;
    list_elem* back;
};

struct hospital {
    int personnel;
    int free_personnel;
    int num_waiting;
    list_elem waiting;   // sentinels (p == nullptr)
    list_elem assess;
    list_elem inside;
    list_elem up;
};

struct village {
    village* forward[4];
    village* back;
    list_elem returned;
    hospital hosp;
    int label;
    int level;
    rng seed{0};
};

using olden::alloc_obj;
using olden::free_obj;

// Appends p: walks to the tail, the new element is allocated next to it.
template <bench::policy P>
void add_list(P& a, list_elem* head, patient* p) {
    list_elem* tail = head;
    while (tail->forward != nullptr) tail = tail->forward;
    list_elem* e = alloc_obj<list_elem>(a, tail);
    e->p = p;
    e->forward = nullptr;
    e->back = tail;
    tail->forward = e;
}

// Unlinks and frees the element holding p (searching from the head).
template <bench::policy P>
bool remove_list(P& a, list_elem* head, const patient* p) {
    list_elem* e = head->forward;
    while (e != nullptr && e->p != p) e = e->forward;
    if (e == nullptr) return false;
    e->back->forward = e->forward;
    if (e->forward != nullptr) e->forward->back = e->back;
    free_obj(a, e);
    return true;
}

struct sim_state {
    std::uint64_t generated = 0;
    bool list_error = false;
};

template <bench::policy P>
village* alloc_tree(P& a, const void* hint, int level, int label, village* back, std::uint64_t seed) {
    if (level == 0) return nullptr;
    village* v = alloc_obj<village>(a, hint);
    v->back = back;
    v->label = label;
    v->level = level;
    v->seed = rng(mix64(seed ^ (static_cast<std::uint64_t>(label) * 0x9e3779b97f4a7c15ULL)));
    v->hosp.personnel = 1 << (level - 1);
    v->hosp.free_personnel = v->hosp.personnel;
    for (int i = 0; i < 4; ++i) v->forward[i] = alloc_tree(a, v, level - 1, label * 4 + i + 1, v, seed);
    return v;
}

template <bench::policy P>
void put_in_hosp(P& a, hospital& h, patient* p) {
    ++p->hosps_visited;
    if (h.free_personnel > 0) {
        --h.free_personnel;
        add_list(a, &h.assess, p);
        p->time_left = 3;
        p->time += 3;
    } else {
        ++h.num_waiting;
        add_list(a, &h.waiting, p);
    }
}

template <bench::policy P>
void check_patients_inside(P& a, village* v, sim_state& st) {
    hospital& h = v->hosp;
    list_elem* e = h.inside.forward;
    while (e != nullptr) {
        list_elem* next = e->forward;
        patient* p = e->p;
        if (--p->time_left == 0) {
            ++h.free_personnel;
            if (!remove_list(a, &h.inside, p)) st.list_error = true;
            add_list(a, &v->returned, p);
        }
        e = next;
    }
}

template <bench::policy P>
void check_patients_assess(P& a, village* v, sim_state& st) {
    hospital& h = v->hosp;
    list_elem* e = h.assess.forward;
    while (e != nullptr) {
        list_elem* next = e->forward;
        patient* p = e->p;
        if (--p->time_left == 0) {
            const double u = v->seed.uniform();
            if (u > 0.1 || v->label == 0) {
                // treated here
                if (!remove_list(a, &h.assess, p)) st.list_error = true;
                add_list(a, &h.inside, p);
                p->time_left = 10;
                p->time += 10;
            } else {
                // referred to the parent village
                ++h.free_personnel;
                if (!remove_list(a, &h.assess, p)) st.list_error = true;
                add_list(a, &h.up, p);
            }
        }
        e = next;
    }
}

template <bench::policy P>
void check_patients_waiting(P& a, village* v, sim_state& st) {
    hospital& h = v->hosp;
    list_elem* e = h.waiting.forward;
    while (e != nullptr) {
        list_elem* next = e->forward;
        patient* p = e->p;
        if (h.free_personnel > 0) {
            --h.free_personnel;
            --h.num_waiting;
            p->time_left = 3;
            p->time += 3;
            if (!remove_list(a, &h.waiting, p)) st.list_error = true;
            add_list(a, &h.assess, p);
        } else {
            ++p->time;
        }
        e = next;
    }
}

template <bench::policy P>
patient* generate_patient(P& a, village* v, sim_state& st) {
    if (v->seed.uniform() > 0.666) {
        patient* p = alloc_obj<patient>(a, v);
        p->home = v;
        ++st.generated;
        return p;
    }
    return nullptr;
}

template <bench::policy P>
void sim(P& a, village* v, sim_state& st) {
    if (v == nullptr) return;
    for (int i = 3; i >= 0; --i) sim(a, v->forward[i], st);
    // take in the children's referrals
    for (int i = 0; i < 4; ++i) {
        village* c = v->forward[i];
        if (c == nullptr) continue;
        list_elem* e = c->hosp.up.forward;
        while (e != nullptr) {
            list_elem* next = e->forward;
            patient* p = e->p;
            put_in_hosp(a, v->hosp, p);
            if (!remove_list(a, &c->hosp.up, p)) st.list_error = true;
            e = next;
        }
    }
    check_patients_inside(a, v, st);
    check_patients_assess(a, v, st);
    check_patients_waiting(a, v, st);
    if (patient* p = generate_patient(a, v, st)) put_in_hosp(a, v->hosp, p);
}

struct tally {
    std::uint64_t patients = 0;   // all patients found in lists
    std::uint64_t returned = 0;
    std::uint64_t total_time = 0;
    std::uint64_t total_visits = 0;
    std::uint64_t hash = 0;
    bool bad_patient = false;
    bool bad_staff = false;
};

inline std::uint64_t count_list(const list_elem* head, tally& t, bool returned) {
    std::uint64_t n = 0;
    for (const list_elem* e = head->forward; e != nullptr; e = e->forward) {
        const patient* p = e->p;
        ++n;
        if (p == nullptr || p->hosps_visited < 1 || p->time < 0 || p->time_left < 0 || p->home == nullptr)
            t.bad_patient = true;
        if (returned && p != nullptr) {
            t.total_time += static_cast<std::uint64_t>(p->time);
            t.total_visits += static_cast<std::uint64_t>(p->hosps_visited);
        }
    }
    return n;
}

inline void get_results(const village* v, tally& t) {
    if (v == nullptr) return;
    for (int i = 0; i < 4; ++i) get_results(v->forward[i], t);
    const hospital& h = v->hosp;
    const std::uint64_t nr = count_list(&v->returned, t, true);
    const std::uint64_t nw = count_list(&h.waiting, t, false);
    const std::uint64_t na = count_list(&h.assess, t, false);
    const std::uint64_t ni = count_list(&h.inside, t, false);
    const std::uint64_t nu = count_list(&h.up, t, false);
    t.returned += nr;
    t.patients += nr + nw + na + ni + nu;
    // staff is conserved: every busy member holds exactly one assessed or treated patient
    if (static_cast<std::uint64_t>(h.personnel - h.free_personnel) != na + ni || h.free_personnel < 0 ||
        static_cast<std::uint64_t>(h.num_waiting) != nw)
        t.bad_staff = true;
    t.hash = combine(t.hash, static_cast<std::uint64_t>(v->label));
    t.hash = combine(t.hash, nr | (nw << 16) | (na << 32) | (ni << 40) | (nu << 48));
}

template <bench::policy P>
void free_list(P& a, list_elem* head, bool free_patients) {
    list_elem* e = head->forward;
    while (e != nullptr) {
        list_elem* next = e->forward;
        if (free_patients && e->p != nullptr) free_obj(a, e->p);
        free_obj(a, e);
        e = next;
    }
    head->forward = nullptr;
}

template <bench::policy P>
void release(P& a, village* v) {
    if (v == nullptr) return;
    for (int i = 0; i < 4; ++i) release(a, v->forward[i]);
    free_list(a, &v->returned, true);
    free_list(a, &v->hosp.waiting, true);
    free_list(a, &v->hosp.assess, true);
    free_list(a, &v->hosp.inside, true);
    free_list(a, &v->hosp.up, true);
    free_obj(a, v);
}

struct params {
    int levels;
    int steps;
};

inline params problem_size(scale s) {
    switch (s) {
    case scale::quick: return {5, 500};
    case scale::standard: return {5, 600};
    case scale::full: return {5, 3000};   // paper: 5 levels, 3000 steps
    }
    return {0, 0};
}

// The whole program; run_health below is its public entry point.
template <bench::policy P>
std::uint64_t run(P& alloc, scale s) {
    const params pr = problem_size(s);
    village* top = alloc_tree(alloc, nullptr, pr.levels, 0, nullptr, 0x6865616c7468ULL);
    sim_state st;
    for (int step = 0; step < pr.steps; ++step) sim(alloc, top, st);

    tally t;
    get_results(top, t);
    std::string error;
    if (st.list_error) error = "health: patient missing from the list it should be in";
    else if (t.patients != st.generated) error = "health: patient count not conserved";
    else if (t.bad_patient) error = "health: inconsistent patient record";
    else if (t.bad_staff) error = "health: hospital staff not conserved";

    std::uint64_t h = combine(t.hash, st.generated);
    h = combine(h, t.returned);
    h = combine(h, t.total_time);
    h = combine(h, t.total_visits);
    release(alloc, top);
    if (!error.empty()) throw std::runtime_error(error);
    return h;
}

} // namespace health_impl

template <bench::policy P>
std::uint64_t run_health(P& alloc, scale s) {
    return health_impl::run(alloc, s);
}

} // namespace bench::olden
