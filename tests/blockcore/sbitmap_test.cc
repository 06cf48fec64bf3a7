// The rules of sbitmap.h, a test case (or more) each. Built twice: as sbitmap_test (the unit
// cases) and, with BIOFS_SBITMAP_STRESS, as sbitmap_stress_test (the multi-threaded stress
// cases, which the TSan configuration runs; BIOFS_STRESS_SECONDS sets their length).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include "blockcore/sbitmap.h"

using namespace biofs;
using namespace std::chrono_literals;

namespace {

// Polls cond every millisecond for up to `limit`; true once it holds. Waiters in the tests
// give up after 10 s, so a wake-up that never comes fails here first.
template <typename Cond>
bool eventually(Cond cond, std::chrono::milliseconds limit = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

#ifndef BIOFS_SBITMAP_STRESS

namespace {
// Points the calling thread's allocation hint at `bit`, so that a test knows where a get starts.
void set_my_hint(Sbitmap& sb, unsigned bit) { sb.cpu[sbitmap_current_cpu()].alloc_hint.store(bit); }

unsigned long word_of(const Sbitmap& sb, unsigned index) { return sb.map[index].word.load(); }
unsigned long cleared_of(const Sbitmap& sb, unsigned index) { return sb.map[index].cleared.load(); }

}  // namespace

TEST_CASE("rule 1: small maps get narrower words, at least four of them") {
  CHECK(sbitmap_calculate_shift(0) == 6);
  CHECK(sbitmap_calculate_shift(3) == 6);
  CHECK(sbitmap_calculate_shift(4) == 0);    // four 1-bit words
  CHECK(sbitmap_calculate_shift(16) == 2);
  CHECK(sbitmap_calculate_shift(32) == 3);
  CHECK(sbitmap_calculate_shift(64) == 4);
  CHECK(sbitmap_calculate_shift(200) == 5);
  CHECK(sbitmap_calculate_shift(256) == 6);
  CHECK(sbitmap_calculate_shift(1023) == 6);
  Sbitmap sb;
  REQUIRE(sbitmap_init_node(&sb, 100) == 0);
  CHECK(sb.shift == 4);
  CHECK(sb.map_capacity == 7);
  CHECK(sbitmap_word_depth(&sb, 100, 6) == 4);
  // Words and their cleared masks sit on separate cache lines.
  CHECK(sizeof(SbitmapWord) == 128);
  CHECK(reinterpret_cast<uintptr_t>(&sb.map[1]) % 64 == 0);
}

TEST_CASE("single get and clear") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 128, 6) == 0);
  unsigned cpu = ~0u;
  const int nr = sbitmap_queue_get(&sbq, &cpu);
  REQUIRE(nr >= 0);
  CHECK(nr < 128);
  CHECK(cpu == sbitmap_current_cpu());
  CHECK(cpu < SBITMAP_NR_CPUS);
  CHECK(sbitmap_test_bit(&sbq.sb, unsigned(nr)));
  CHECK(sbitmap_weight(&sbq.sb) == 1);
  CHECK(sbitmap_any_bit_set(&sbq.sb));

  sbitmap_queue_clear(&sbq, unsigned(nr), cpu);
  CHECK(sbitmap_weight(&sbq.sb) == 0);
  CHECK_FALSE(sbitmap_any_bit_set(&sbq.sb));
  CHECK(sbq.sb.cpu[cpu].alloc_hint.load() == unsigned(nr));  // the freed tag is the next start

  const SbitmapStats s = sbitmap_queue_stats(&sbq);
  CHECK(s.gets == 1);
  CHECK(s.get_failed == 0);
}

TEST_CASE("every bit can be taken once, then gets fail until one is freed") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 128, 6) == 0);
  std::set<int> got;
  for (int i = 0; i < 128; i++) {
    const int nr = sbitmap_queue_get_bit(&sbq);
    REQUIRE(nr >= 0);
    REQUIRE(nr < 128);
    got.insert(nr);
  }
  CHECK(got.size() == 128);
  CHECK(sbitmap_queue_get_bit(&sbq) == -1);
  CHECK(sbitmap_weight(&sbq.sb) == 128);
  sbitmap_queue_clear(&sbq, 77, sbitmap_current_cpu());
  CHECK(sbitmap_queue_get_bit(&sbq) == 77);
  const SbitmapStats s = sbitmap_queue_stats(&sbq);
  CHECK(s.gets == 130);
  CHECK(s.get_failed == 1);
  CHECK(s.tags_obtained() == 129);
}

TEST_CASE("rule 1: a depth that is not a multiple of the word size: no bit >= depth") {
  for (int shift : {6, -1}) {
    CAPTURE(shift);
    for (unsigned start : {0u, 63u, 99u}) {  // a hint in the first, a middle and the last word
      CAPTURE(start);
      Sbitmap sb;
      REQUIRE(sbitmap_init_node(&sb, 100, shift) == 0);
      set_my_hint(sb, start);
      std::set<int> got;
      for (;;) {
        const int nr = sbitmap_get(&sb);
        if (nr < 0) break;
        REQUIRE(nr < 100);
        got.insert(nr);
      }
      CHECK(got.size() == 100);
      CHECK(sbitmap_weight(&sb) == 100);
    }
  }
  SUBCASE("batch gets stop at the short last word too") {
    SbitmapQueue sbq;
    REQUIRE(sbitmap_queue_init_node(&sbq, 100, 6) == 0);
    set_my_hint(sbq.sb, 99);
    std::set<unsigned> got;
    unsigned offset = 0;
    while (unsigned long mask = sbitmap_queue_get_batch(&sbq, 16, &offset)) {
      for (; mask; mask &= mask - 1) {
        const unsigned tag = offset + unsigned(std::countr_zero(mask));
        REQUIRE(tag < 100);
        CHECK(got.insert(tag).second);
      }
    }
    // Four windows of 16 in the 64-bit word, two in the 36-bit last word; its last 4 bits
    // cannot hold a whole window, so the batch fails there, as the kernel's does.
    CHECK(got.size() == 96);
    CHECK(sbitmap_queue_get_bit(&sbq) >= 96);
  }
  SUBCASE("a shrunk map stops at its new depth") {
    Sbitmap sb;
    REQUIRE(sbitmap_init_node(&sb, 100, 6) == 0);
    REQUIRE(sbitmap_resize(&sb, 70) == 0);
    int n = 0;
    for (int nr; (nr = sbitmap_get(&sb)) >= 0; n++) REQUIRE(nr < 70);
    CHECK(n == 70);
  }
}

TEST_CASE("rule 2: a free goes to `cleared`, a get that finds the word full folds it back") {
  SbitmapQueue sbq;  // one word
  REQUIRE(sbitmap_queue_init_node(&sbq, 64, 6) == 0);
  Sbitmap& sb = sbq.sb;
  for (int i = 0; i < 64; i++) REQUIRE(sbitmap_queue_get_bit(&sbq) == i);  // lowest free bit first
  sbitmap_queue_clear(&sbq, 5, 0);
  sbitmap_queue_clear(&sbq, 9, 0);
  CHECK(cleared_of(sb, 0) == ((1UL << 5) | (1UL << 9)));
  CHECK(word_of(sb, 0) == ~0UL);  // untouched by the frees
  CHECK(sbitmap_weight(&sb) == 62);
  CHECK(sbitmap_test_bit(&sb, 5));  // the kernel's test_bit looks at `word` only

  CHECK(sbitmap_queue_get_bit(&sbq) == 5);
  CHECK(cleared_of(sb, 0) == 0);
  CHECK(word_of(sb, 0) == ~(1UL << 9));
  CHECK(sbitmap_queue_stats(&sbq).folds == 1);
  CHECK(sbitmap_queue_get_bit(&sbq) == 9);
  CHECK(sbitmap_queue_get_bit(&sbq) == -1);
  CHECK(sbitmap_queue_stats(&sbq).folds == 1);
}

TEST_CASE("rule 2: a get that finds a free bit leaves `cleared` alone") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 64, 6) == 0);
  for (int i = 0; i < 10; i++) REQUIRE(sbitmap_queue_get_bit(&sbq) == i);
  sbitmap_queue_clear(&sbq, 3, 0);
  CHECK(sbitmap_queue_get_bit(&sbq) == 10);
  CHECK(cleared_of(sbq.sb, 0) == (1UL << 3));
  CHECK(sbitmap_queue_stats(&sbq).folds == 0);
}

TEST_CASE("rule 3: the hint picks the word, a full map resets it, round_robin moves on") {
  Sbitmap sb;
  REQUIRE(sbitmap_init_node(&sb, 256, 6) == 0);
  set_my_hint(sb, 130);
  CHECK(sbitmap_get(&sb) == 128);  // word 2, from its bit 0
  Sbitmap full;
  REQUIRE(sbitmap_init_node(&full, 4, 0) == 0);
  for (int i = 0; i < 4; i++) REQUIRE(sbitmap_get(&full) >= 0);
  set_my_hint(full, 3);
  CHECK(sbitmap_get(&full) == -1);
  CHECK(full.cpu[sbitmap_current_cpu()].alloc_hint.load() == 0);

  Sbitmap rr;

  REQUIRE(sbitmap_init_node(&rr, 128, 6, true) == 0);
  CHECK(sbitmap_get(&rr) == 0);
  CHECK(sbitmap_get(&rr) == 1);
  sbitmap_clear_bit(&rr, 0);
  CHECK(sbitmap_get(&rr) == 2);  // round robin does not go back to 0
  set_my_hint(rr, 127);
  CHECK(sbitmap_get(&rr) == 127);
  CHECK(sbitmap_get(&rr) == 0);  // wrapped
  // Only bits below the hint's bit in its own word are free: still found.
  for (int nr; (nr = sbitmap_get(&rr)) >= 0;) {
  }
  sbitmap_clear_bit(&rr, 70);
  set_my_hint(rr, 100);
  CHECK(sbitmap_get(&rr) == 70);
}

TEST_CASE("sbitmap_get_shallow uses at most shallow_depth bits of the whole map") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 256, 6) == 0);
  sbitmap_queue_min_shallow_depth(&sbq, 16);
  CHECK(sbq.wake_batch.load() == 2);  // clamp(16 / 8, 1, 8)
  int n = 0;
  for (int nr; (nr = sbitmap_queue_get_shallow(&sbq, 40)) >= 0; n++) {
    // 40 of 256 bits: 10 in each 64-bit word.
    REQUIRE(nr % 64 < 10);
  }
  CHECK(n == 40);
  CHECK(sbitmap_queue_get_bit(&sbq) >= 0);  // a full-depth get still finds room
}

TEST_CASE("rule 4: a batch get takes contiguous bits from one word") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 256, 6) == 0);
  set_my_hint(sbq.sb, 64);
  unsigned offset = ~0u;
  CHECK(sbitmap_queue_get_batch(&sbq, 8, &offset) == 0xffUL);
  CHECK(offset == 64);
  CHECK(word_of(sbq.sb, 1) == 0xffUL);
  CHECK(sbitmap_queue_get_batch(&sbq, 8, &offset) == 0xffUL);
  CHECK(offset == 72);
  // 64 from bit 16 of word 1 would run past its end: the next word has room for all of them.
  CHECK(sbitmap_queue_get_batch(&sbq, 64, &offset) == ~0UL);
  CHECK(offset == 128);
  // More than a word's bits: no batch at all (v6.18), not a word's worth; see the v6.18 case.
  SbitmapQueue other;
  REQUIRE(sbitmap_queue_init_node(&other, 128, 6) == 0);
  CHECK(sbitmap_queue_get_batch(&other, 100, &offset) == 0);
  CHECK(word_of(other.sb, 0) == 0);
  CHECK(word_of(other.sb, 1) == 0);
  const SbitmapStats s = sbitmap_queue_stats(&sbq);
  CHECK(s.batch_gets == 3);
  CHECK(s.batch_tags == 80);
  CHECK(s.batch_failed == 0);
  CHECK(s.tags_per_call() == doctest::Approx(80.0 / 3));
}

TEST_CASE("rule 4: a batch get returns fewer than asked, with the exact mask") {
  SUBCASE("a taken bit inside the window is a hole in the mask") {
    SbitmapQueue sbq;
    REQUIRE(sbitmap_queue_init_node(&sbq, 64, 6) == 0);
    sbitmap_set_bit(&sbq.sb, 1);
    unsigned offset = ~0u;
    CHECK(sbitmap_queue_get_batch(&sbq, 4, &offset) == 0b1101UL);
    CHECK(offset == 0);
    CHECK(word_of(sbq.sb, 0) == 0b1111UL);
  }
  SUBCASE("the window starts at the first free bit") {
    SbitmapQueue sbq;
    REQUIRE(sbitmap_queue_init_node(&sbq, 64, 6) == 0);
    for (unsigned b : {0u, 1u, 2u, 5u}) sbitmap_set_bit(&sbq.sb, b);
    unsigned offset = ~0u;
    CHECK(sbitmap_queue_get_batch(&sbq, 4, &offset) == 0b1011UL);  // bits 3, 4 and 6
    CHECK(offset == 3);
    CHECK(word_of(sbq.sb, 0) == 0x7fUL);
    CHECK(sbitmap_queue_stats(&sbq).batch_tags == 3);
  }
  SUBCASE("only a short run is left at the end of the word: the batch fails, nothing is taken") {
    SbitmapQueue sbq;
    REQUIRE(sbitmap_queue_init_node(&sbq, 64, 6) == 0);
    for (unsigned b = 0; b < 60; b++) sbitmap_set_bit(&sbq.sb, b);
    unsigned offset = ~0u;
    CHECK(sbitmap_queue_get_batch(&sbq, 8, &offset) == 0);
    CHECK(word_of(sbq.sb, 0) == (1UL << 60) - 1);
    CHECK(sbitmap_queue_stats(&sbq).batch_failed == 1);
  }
  SUBCASE("only a word where the whole window fits is used") {
    SbitmapQueue sbq;
    REQUIRE(sbitmap_queue_init_node(&sbq, 128, 6) == 0);
    for (unsigned b = 0; b < 62; b++) sbitmap_set_bit(&sbq.sb, b);
    set_my_hint(sbq.sb, 0);
    unsigned offset = ~0u;
    CHECK(sbitmap_queue_get_batch(&sbq, 8, &offset) == 0xffUL);
    CHECK(offset == 64);
    for (unsigned b = 72; b < 128; b++) sbitmap_set_bit(&sbq.sb, b);
    offset = ~0u;
    CHECK(sbitmap_queue_get_batch(&sbq, 8, &offset) == 0);  // bits 62, 63 free: too short
    CHECK(offset == ~0u);
  }
  SUBCASE("freed bits waiting in `cleared` are folded and handed out") {
    SbitmapQueue sbq;
    REQUIRE(sbitmap_queue_init_node(&sbq, 64, 6) == 0);
    for (int i = 0; i < 64; i++) REQUIRE(sbitmap_queue_get_bit(&sbq) >= 0);
    for (unsigned b : {10u, 11u, 12u}) sbitmap_queue_clear(&sbq, b, 0);
    unsigned offset = ~0u;
    CHECK(sbitmap_queue_get_batch(&sbq, 8, &offset) == 0b111UL);
    CHECK(offset == 10);
    CHECK(cleared_of(sbq.sb, 0) == 0);
    CHECK(word_of(sbq.sb, 0) == ~0UL);
    CHECK(sbitmap_queue_stats(&sbq).folds == 1);
  }
  SUBCASE("a full map gives 0") {
    SbitmapQueue sbq;
    REQUIRE(sbitmap_queue_init_node(&sbq, 100, 6) == 0);
    for (int i = 0; i < 100; i++) REQUIRE(sbitmap_queue_get_bit(&sbq) >= 0);
    unsigned offset = 12345;
    CHECK(sbitmap_queue_get_batch(&sbq, 8, &offset) == 0);
    CHECK(offset == 12345);
    CHECK(sbitmap_queue_stats(&sbq).batch_failed == 1);
  }
  SUBCASE("round_robin maps never batch") {
    SbitmapQueue sbq;
    REQUIRE(sbitmap_queue_init_node(&sbq, 64, 6, true) == 0);
    unsigned offset = 0;
    CHECK(sbitmap_queue_get_batch(&sbq, 4, &offset) == 0);
  }
}

// ---- kernel rules (v6.18), blockcore/README.md "Kernel rules followed" ----

TEST_CASE("v6.18 __sbitmap_queue_get_batch: nr_tags over a word's bits gets no batch (0), never a clamped partial one") {
  SbitmapQueue wide;  // two 64-bit words
  REQUIRE(sbitmap_queue_init_node(&wide, 128, 6) == 0);
  set_my_hint(wide.sb, 0);
  unsigned offset = 12345;
  CHECK(sbitmap_queue_get_batch(&wide, 65, &offset) == 0);
  CHECK(sbitmap_queue_get_batch(&wide, 100, &offset) == 0);
  CHECK(offset == 12345);
  CHECK(word_of(wide.sb, 0) == 0);  // nothing taken
  CHECK(word_of(wide.sb, 1) == 0);
  CHECK(sbitmap_queue_stats(&wide).batch_failed == 2);
  // blk-mq's tag maps under 128 tags have narrower words: depth 64 gives 16-bit words, so a
  // plug's batch of 32 gets nothing there, while 16 fits.
  SbitmapQueue narrow;
  REQUIRE(sbitmap_queue_init_node(&narrow, 64) == 0);
  REQUIRE(narrow.sb.shift == 4);
  set_my_hint(narrow.sb, 0);
  CHECK(sbitmap_queue_get_batch(&narrow, 32, &offset) == 0);
  CHECK(sbitmap_weight(&narrow.sb) == 0);
  CHECK(sbitmap_queue_get_batch(&narrow, 16, &offset) == 0xffffUL);
  CHECK(offset == 0);
}

TEST_CASE("v6.18 __sbitmap_queue_get_batch: sbitmap_deferred_clear folds each visited word before the window is placed") {
  SbitmapQueue sbq;  // one word
  REQUIRE(sbitmap_queue_init_node(&sbq, 64, 6) == 0);
  for (int i = 0; i < 10; i++) REQUIRE(sbitmap_queue_get_bit(&sbq) == i);
  for (unsigned b = 3; b < 7; b++) sbitmap_queue_clear(&sbq, b, 0);  // deferred: in `cleared`
  REQUIRE(cleared_of(sbq.sb, 0) == 0x78UL);
  REQUIRE(word_of(sbq.sb, 0) == 0x3ffUL);
  unsigned offset = ~0u;
  // Folded first, so the word's first free bit is 3 (not 10): the window is bits 3..6.
  CHECK(sbitmap_queue_get_batch(&sbq, 4, &offset) == 0b1111UL);
  CHECK(offset == 3);
  CHECK(cleared_of(sbq.sb, 0) == 0);
  CHECK(word_of(sbq.sb, 0) == 0x3ffUL);  // bits 0..9 again, bits 3..6 now the batch's
  CHECK(sbitmap_queue_stats(&sbq).folds == 1);

  // A word the batch passes over is folded too: word 0 is full but for bit 63, freed through
  // `cleared`; a window of 8 cannot fit there, the batch comes from word 1, and word 0's
  // `cleared` has been folded on the way.
  SbitmapQueue two;
  REQUIRE(sbitmap_queue_init_node(&two, 128, 6) == 0);
  for (int i = 0; i < 64; i++) sbitmap_set_bit(&two.sb, unsigned(i));
  sbitmap_deferred_clear_bit(&two.sb, 63);
  set_my_hint(two.sb, 0);
  CHECK(sbitmap_queue_get_batch(&two, 8, &offset) == 0xffUL);
  CHECK(offset == 64);
  CHECK(cleared_of(two.sb, 0) == 0);
  CHECK(word_of(two.sb, 0) == ~(1UL << 63));
}

TEST_CASE("v6.18 __sbitmap_queue_get_batch: the window is placed once per word, a failed compare-and-swap retries the same window") {
  // The word changed between the read that placed the window (val 0: window at bit 0) and the
  // CAS: bits 0 and 1 were taken meanwhile. The window stays at bit 0 and those two bits are
  // holes in the mask; it does not move to the new first free bit.
  std::atomic<unsigned long> word{0b11UL};
  CHECK(sbitmap_batch_take_window(word, 0, 0, 4) == 0b1100UL);
  CHECK(word.load() == 0b1111UL);
  // The whole window was taken meanwhile: nothing obtained (the batch then tries the next word).
  std::atomic<unsigned long> taken{0xf0UL};
  CHECK(sbitmap_batch_take_window(taken, 0, 4, 4) == 0);
  CHECK(taken.load() == 0xf0UL);
}

TEST_CASE("v6.18 __sbitmap_queue_get_batch: a word with map_depth - 1 bits set counts as full and is passed over") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 128, 6) == 0);
  for (unsigned b = 0; b < 63; b++) sbitmap_set_bit(&sbq.sb, b);  // word 0: only bit 63 free
  set_my_hint(sbq.sb, 0);
  unsigned offset = ~0u;
  // v6.18 compares the word with (1UL << (map_depth - 1)) - 1: word 0 is skipped even for one
  // tag, which comes from word 1. (blk-mq never batches a single tag, so only this shows it.)
  CHECK(sbitmap_queue_get_batch(&sbq, 1, &offset) == 1UL);
  CHECK(offset == 64);
  CHECK_FALSE(sbitmap_test_bit(&sbq.sb, 63));
}

TEST_CASE("rule 5: clear_batch frees straight into `word`, whatever the order of the tags") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 256, 6) == 0);
  std::vector<int> tags;
  unsigned offset = 0;
  set_my_hint(sbq.sb, 0);
  for (int i = 0; i < 2; i++) {
    const unsigned long mask = sbitmap_queue_get_batch(&sbq, 8, &offset);
    REQUIRE(mask == 0xffUL);
    REQUIRE(offset == unsigned(8 * i));
  }
  set_my_hint(sbq.sb, 64);
  REQUIRE(sbitmap_queue_get_batch(&sbq, 8, &offset) == 0xffUL);
  REQUIRE(offset == 64);
  // Tags as blk-mq passes them: bit + offset (here 4), interleaving the two words.
  for (int i = 0; i < 8; i++) {
    tags.push_back(i + 4);
    tags.push_back(64 + i + 4);
  }
  sbitmap_queue_clear_batch(&sbq, 4, tags.data(), 3);  // bits 0, 64 and 1
  CHECK(word_of(sbq.sb, 0) == 0xfffcUL);
  CHECK(word_of(sbq.sb, 1) == 0xfeUL);
  sbitmap_queue_clear_batch(&sbq, 4, tags.data() + 3, int(tags.size()) - 3);
  CHECK(word_of(sbq.sb, 0) == 0xff00UL);
  CHECK(word_of(sbq.sb, 1) == 0);
  CHECK(cleared_of(sbq.sb, 0) == 0);
  CHECK(cleared_of(sbq.sb, 1) == 0);
  CHECK(sbq.sb.cpu[sbitmap_current_cpu()].alloc_hint.load() == 71);  // the last tag freed
  // More words than the batch keeps pending at once (8): every one is still freed.
  SbitmapQueue wide;  // 64 words of 4 bits
  REQUIRE(sbitmap_queue_init_node(&wide, 256, 2) == 0);
  std::vector<int> all;
  for (int nr; (nr = sbitmap_queue_get_bit(&wide)) >= 0;) all.push_back(nr);
  REQUIRE(all.size() == 256);
  std::vector<int> spread;
  for (int b = 0; b < 4; b++)
    for (int w = 0; w < 64; w++) spread.push_back(w * 4 + b);
  sbitmap_queue_clear_batch(&wide, 0, spread.data(), int(spread.size()));
  CHECK(sbitmap_weight(&wide.sb) == 0);
  for (unsigned w = 0; w < 64; w++) REQUIRE(word_of(wide.sb, w) == 0);
}

TEST_CASE("rule 6: a waiter on a full map sleeps until wake_batch tags come back") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 32) == 0);
  REQUIRE(sbq.wake_batch.load() == 4);
  std::vector<int> held;
  for (int nr; (nr = sbitmap_queue_get_bit(&sbq)) >= 0;) held.push_back(nr);
  REQUIRE(held.size() == 32);

  std::atomic<int> result{-2};
  std::thread waiter([&] {
    unsigned cpu;
    result = sbitmap_queue_get_wait(&sbq, &cpu, 10s);
  });
  REQUIRE(eventually([&] { return sbitmap_queue_stats(&sbq).waits >= 1; }));
  CHECK(sbq.ws_active.load() == 1);
  for (int i = 0; i < 3; i++) sbitmap_queue_clear(&sbq, unsigned(held[i]), 0);
  std::this_thread::sleep_for(200ms);
  CHECK(result.load() == -2);  // three completions: not a batch yet
  CHECK(sbitmap_queue_stats(&sbq).wake_batches == 0);
  sbitmap_queue_clear(&sbq, unsigned(held[3]), 0);
  CHECK(eventually([&] { return result.load() != -2; }));
  waiter.join();
  CHECK(std::find(held.begin(), held.begin() + 4, result.load()) != held.begin() + 4);
  CHECK(sbitmap_queue_stats(&sbq).wake_batches == 1);
  CHECK(sbitmap_queue_stats(&sbq).wait_timeouts == 0);
  CHECK(sbq.ws_active.load() == 0);
}

TEST_CASE("rule 6: one batch wakes wake_batch waiters, the next batch the rest") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 32) == 0);
  std::vector<int> held;
  for (int nr; (nr = sbitmap_queue_get_bit(&sbq)) >= 0;) held.push_back(nr);
  REQUIRE(held.size() == 32);
  constexpr int kWaiters = 6;
  std::atomic<int> done{0}, failed{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; i++)
    waiters.emplace_back([&] {
      unsigned cpu;
      if (sbitmap_queue_get_wait(&sbq, &cpu, 10s) < 0) failed++;
      done++;
    });
  REQUIRE(eventually([&] { return sbq.ws_active.load() == kWaiters && sbitmap_queue_stats(&sbq).waits >= kWaiters; }));
  for (int i = 0; i < 4; i++) sbitmap_queue_clear(&sbq, unsigned(held[i]), 0);
  CHECK(eventually([&] { return done.load() == 4; }));
  std::this_thread::sleep_for(200ms);
  CHECK(done.load() == 4);
  for (int i = 4; i < 8; i++) sbitmap_queue_clear(&sbq, unsigned(held[i]), 0);
  CHECK(eventually([&] { return done.load() == kWaiters; }));
  for (auto& t : waiters) t.join();
  CHECK(failed.load() == 0);
  CHECK(sbitmap_queue_stats(&sbq).wait_timeouts == 0);
  CHECK(sbitmap_queue_stats(&sbq).wake_batches == 2);
  CHECK(sbitmap_weight(&sbq.sb) == 32 - 8 + kWaiters);
}

TEST_CASE("rule 6: clear_batch wakes waiters, a fold made while they wait counts too") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 32) == 0);
  std::vector<int> held;
  for (int nr; (nr = sbitmap_queue_get_bit(&sbq)) >= 0;) held.push_back(nr);
  std::atomic<int> result{-2};
  auto wait_for_tag = [&] {
    unsigned cpu;
    result = sbitmap_queue_get_wait(&sbq, &cpu, 10s);
  };

  std::thread first(wait_for_tag);
  REQUIRE(eventually([&] { return sbitmap_queue_stats(&sbq).waits >= 1; }));
  sbitmap_queue_clear_batch(&sbq, 0, held.data(), 4);
  CHECK(eventually([&] { return result.load() != -2; }));
  first.join();
  CHECK(result.load() >= 0);

  // Fill up again, then free four bits behind the queue's back (no completion is counted):
  // the waiter sleeps on. A plain get that folds them counts them, and that wakes it.
  while (sbitmap_queue_get_bit(&sbq) >= 0) {
  }
  result = -2;
  const uint64_t waits = sbitmap_queue_stats(&sbq).waits;
  std::thread second(wait_for_tag);
  REQUIRE(eventually([&] { return sbitmap_queue_stats(&sbq).waits > waits; }));
  const unsigned word = 2;
  for (unsigned b = 0; b < 4; b++) sbitmap_deferred_clear_bit(&sbq.sb, word * 8 + b);
  std::this_thread::sleep_for(100ms);
  CHECK(result.load() == -2);
  set_my_hint(sbq.sb, word * 8);
  CHECK(sbitmap_queue_get_bit(&sbq) == int(word * 8));  // folds all four, takes one
  CHECK(eventually([&] { return result.load() != -2; }));
  second.join();
  CHECK(result.load() > int(word * 8));
  CHECK(result.load() < int(word * 8 + 4));
  CHECK(sbitmap_queue_stats(&sbq).wait_timeouts == 0);
}

TEST_CASE("rule 6: a wait gives up at its timeout, growing the map wakes everyone") {
  SbitmapQueue sbq;  // one word, capacity 8
  REQUIRE(sbitmap_queue_init_node(&sbq, 8, 3) == 0);
  REQUIRE(sbitmap_queue_resize(&sbq, 4) == 0);
  for (int i = 0; i < 4; i++) REQUIRE(sbitmap_queue_get_bit(&sbq) >= 0);
  unsigned cpu;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(sbitmap_queue_get_wait(&sbq, &cpu, 50ms) == -1);
  CHECK(std::chrono::steady_clock::now() - t0 >= 50ms);
  CHECK(sbitmap_queue_stats(&sbq).wait_timeouts == 1);
  CHECK(sbq.ws_active.load() == 0);

  std::atomic<int> result{-2};
  std::thread waiter([&] {
    unsigned c;
    result = sbitmap_queue_get_wait(&sbq, &c, 10s);
  });
  REQUIRE(eventually([&] { return sbitmap_queue_stats(&sbq).waits >= 2; }));
  REQUIRE(sbitmap_queue_resize(&sbq, 8) == 0);
  CHECK(eventually([&] { return result.load() != -2; }));
  waiter.join();
  CHECK(result.load() >= 4);
  CHECK(result.load() < 8);
  CHECK(sbitmap_queue_stats(&sbq).wait_timeouts == 1);  // only the first wait gave up
}

TEST_CASE("each thread has its own slot while it lives, and gives it back when it exits") {
  const unsigned mine = sbitmap_current_cpu();
  CHECK(sbitmap_current_cpu() == mine);
  std::vector<unsigned> slots(8);
  std::atomic<int> arrived{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; i++)
    threads.emplace_back([&, i] {
      slots[i] = sbitmap_current_cpu();
      arrived++;
      while (arrived.load() < 8) std::this_thread::yield();  // all alive at once
    });
  for (auto& t : threads) t.join();
  std::set<unsigned> distinct(slots.begin(), slots.end());
  distinct.insert(mine);
  CHECK(distinct.size() == 9);
  // A thread that exits gives its slot back: the next thread gets the same one.
  unsigned first = ~0u, second = ~1u;
  std::thread([&] { first = sbitmap_current_cpu(); }).join();
  std::thread([&] { second = sbitmap_current_cpu(); }).join();
  CHECK(first == second);
}

#else  // BIOFS_SBITMAP_STRESS

namespace {

double stress_seconds() {
  const char* s = std::getenv("BIOFS_STRESS_SECONDS");
  return s ? std::atof(s) : 1.0;
}

constexpr int kFree = -1;
constexpr int kMailbox = -2;

struct Owners {
  explicit Owners(unsigned depth) : owner(depth) {
    for (auto& o : owner) o = kFree;
  }
  std::vector<std::atomic<int>> owner;
  std::atomic<uint64_t> double_handout{0}, bad_free{0}, out_of_range{0};

  void take(unsigned tag, int me) {
    if (tag >= owner.size()) {
      out_of_range++;
      return;
    }
    int expected = kFree;
    if (!owner[tag].compare_exchange_strong(expected, me)) double_handout++;
  }
  void give(unsigned tag, int me, int to = kFree) {
    int expected = me;
    if (!owner[tag].compare_exchange_strong(expected, to)) bad_free++;
  }
};

// A tiny xorshift so every thread makes its own choices.
struct Rng {
  uint32_t s;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
};

}  // namespace

TEST_CASE("stress: 8 threads get, batch-get and free, no tag is ever held twice") {
  constexpr unsigned kDepth = 200;  // 7 words of 32 bits, the last one 8 bits
  constexpr int kThreads = 8;
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, kDepth) == 0);
  REQUIRE(sbq.sb.shift == 5);
  Owners owners(kDepth);
  std::atomic<int> mailbox[4];
  for (auto& m : mailbox) m = -1;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> timeouts{0}, handed_over{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++)
    threads.emplace_back([&, t] {
      Rng rng{uint32_t(0x9E3779B9u * unsigned(t + 1))};
      std::vector<int> held;
      unsigned cpu = 0;
      auto release = [&](size_t keep) {
        while (held.size() > keep) {
          const size_t n = std::min<size_t>(held.size() - keep, 1 + rng.next() % 12);
          const uint32_t how = rng.next() % 4;
          if (how == 0 && n > 1) {  // clear_batch, tags passed with an offset of 3
            std::vector<int> tags;
            for (size_t i = 0; i < n; i++) {
              const int tag = held.back();
              held.pop_back();
              owners.give(unsigned(tag), t);
              tags.push_back(tag + 3);
            }
            sbitmap_queue_clear_batch(&sbq, 3, tags.data(), int(tags.size()));
          } else if (how == 1) {  // hand one to whoever looks at the mailbox next
            const int tag = held.back();
            held.pop_back();
            owners.give(unsigned(tag), t, kMailbox);  // before another thread can see it
            int empty = -1;
            if (!mailbox[rng.next() % 4].compare_exchange_strong(empty, tag)) {  // busy: free it here
              owners.give(unsigned(tag), kMailbox);
              sbitmap_queue_clear(&sbq, unsigned(tag), cpu);
            }
          } else {
            for (size_t i = 0; i < n; i++) {
              const int tag = held.back();
              held.pop_back();
              owners.give(unsigned(tag), t);
              sbitmap_queue_clear(&sbq, unsigned(tag), cpu);
            }
          }
        }
      };
      auto take_mail = [&] {
        const int tag = mailbox[rng.next() % 4].exchange(-1);
        if (tag < 0) return;
        owners.give(unsigned(tag), kMailbox, t);  // ownership moves to this thread
        handed_over++;
        owners.give(unsigned(tag), t);
        sbitmap_queue_clear(&sbq, unsigned(tag), sbitmap_current_cpu());  // freed by another thread
      };
      while (!stop.load(std::memory_order_relaxed)) {
        const size_t limit = 1 + rng.next() % 40;  // 8 x 40 > 200: the map runs full at times
        while (held.size() < limit) {
          const uint32_t how = rng.next() % 3;
          if (held.empty() && how == 0) {
            // Waits only while holding nothing, so that the holders always make progress.
            const int nr = sbitmap_queue_get_wait(&sbq, &cpu, 10s);
            if (nr < 0) {
              timeouts++;
              break;
            }
            owners.take(unsigned(nr), t);
            held.push_back(nr);
          } else if (how == 1) {
            unsigned offset = 0;
            unsigned long mask = sbitmap_queue_get_batch(&sbq, int(1 + rng.next() % 16), &offset);
            if (!mask) break;
            for (; mask; mask &= mask - 1) {
              const int tag = int(offset) + std::countr_zero(mask);
              owners.take(unsigned(tag), t);
              held.push_back(tag);
            }
          } else {
            const int nr = sbitmap_queue_get(&sbq, &cpu);
            if (nr < 0) break;
            owners.take(unsigned(nr), t);
            held.push_back(nr);
          }
        }
        take_mail();
        // Now and then hold on while others run, so that the map fills and callers wait.
        if (rng.next() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng.next() % 200));
        release(rng.next() % 4 == 0 ? 0 : held.size() / 2);
      }
      release(0);
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(stress_seconds()));
  stop = true;
  for (auto& th : threads) th.join();
  for (auto& m : mailbox) {
    const int tag = m.exchange(-1);
    if (tag >= 0) {
      owners.give(unsigned(tag), kMailbox);
      sbitmap_queue_clear(&sbq, unsigned(tag), 0);
    }
  }

  CHECK(owners.double_handout == 0);
  CHECK(owners.bad_free == 0);
  CHECK(owners.out_of_range == 0);
  CHECK(timeouts == 0);
  for (unsigned tag = 0; tag < kDepth; tag++) REQUIRE(owners.owner[tag].load() == kFree);
  CHECK(sbitmap_weight(&sbq.sb) == 0);
  CHECK_FALSE(sbitmap_any_bit_set(&sbq.sb));
  CHECK(sbq.ws_active.load() == 0);
  const SbitmapStats s = sbitmap_queue_stats(&sbq);
  CHECK(s.gets > 1000);
  CHECK(s.batch_tags > 1000);
  MESSAGE("gets=" << s.gets << " failed=" << s.get_failed << " batch_gets=" << s.batch_gets
                  << " batch_tags=" << s.batch_tags << " tags/call=" << s.tags_per_call()
                  << " folds=" << s.folds << " waits=" << s.waits << " wake_batches=" << s.wake_batches
                  << " handed_over=" << handed_over.load());
  // And every bit can be had again.
  std::set<int> all;
  for (int nr; (nr = sbitmap_queue_get_bit(&sbq)) >= 0;) all.insert(nr);
  CHECK(all.size() == kDepth);
}

TEST_CASE("stress: more threads than tags, all waiting, no waiter is left asleep") {
  // depth 16: wake_batch 2, four words of 4 bits. Each thread waits for two tags, takes up to
  // four more if they are free, holds them a while and frees them. A thread waits only while
  // it holds at most one tag, so the waiters never hold all 16 and the holders always make
  // progress: a lost wake-up shows as a 10 s timeout.
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 16) == 0);
  REQUIRE(sbq.wake_batch.load() == 2);
  Owners owners(16);
  constexpr int kThreads = 8;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> timeouts{0}, served{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++)
    threads.emplace_back([&, t] {
      Rng rng{uint32_t(0x2545F491u * unsigned(t + 1))};
      std::vector<int> held;
      unsigned cpu = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        // The second wait holds one tag: 8 threads x 1 < 16, so waiters never hold them all.
        for (int i = 0; i < 2; i++) {
          const int nr = sbitmap_queue_get_wait(&sbq, &cpu, 10s);
          if (nr < 0) {
            timeouts++;
            break;
          }
          owners.take(unsigned(nr), t);
          held.push_back(nr);
          served++;
        }
        const unsigned extra = rng.next() % 5;
        for (unsigned i = 0; i < extra; i++) {
          const int more = sbitmap_queue_get(&sbq, &cpu);
          if (more < 0) break;
          owners.take(unsigned(more), t);
          held.push_back(more);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng.next() % 200));  // hold them a while
        if (rng.next() % 2) {
          for (int tag : held) owners.give(unsigned(tag), t);
          sbitmap_queue_clear_batch(&sbq, 0, held.data(), int(held.size()));
        } else {
          for (int tag : held) {
            owners.give(unsigned(tag), t);
            sbitmap_queue_clear(&sbq, unsigned(tag), cpu);
          }
        }
        held.clear();
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(stress_seconds() / 2));
  stop = true;
  for (auto& th : threads) th.join();
  CHECK(timeouts == 0);
  CHECK(owners.double_handout == 0);
  CHECK(owners.bad_free == 0);
  CHECK(served > 100);
  CHECK(sbitmap_weight(&sbq.sb) == 0);
  CHECK(sbq.ws_active.load() == 0);
  const SbitmapStats s = sbitmap_queue_stats(&sbq);
  CHECK(s.waits > 0);  // the test is about waiting: it must have happened
  MESSAGE("served=" << served.load() << " waits=" << s.waits << " wake_batches=" << s.wake_batches
                    << " folds=" << s.folds);
}

#endif  // BIOFS_SBITMAP_STRESS

// Deliberate difference (sbitmap.h rule 6): v6.18 sbitmap_queue_wake_up() fires at most one
// wake_batch per call, so one clear_batch of 8 tags with wake_batch 4 would wake 4 of 8
// waiters and leave the other 4 asleep beside 4 free tags until some later completion. Here a
// call that brings several batches due fires them all.
TEST_CASE("rule 6 (biofs): one clear_batch that brings two wake batches due wakes both, no waiter sleeps beside a free tag") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 32) == 0);
  REQUIRE(sbq.wake_batch.load() == 4);
  std::vector<int> held;
  for (int nr; (nr = sbitmap_queue_get_bit(&sbq)) >= 0;) held.push_back(nr);
  REQUIRE(held.size() == 32);
  constexpr int kWaiters = 8;
  std::atomic<int> done{0}, failed{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; i++)
    waiters.emplace_back([&] {
      unsigned cpu;
      if (sbitmap_queue_get_wait(&sbq, &cpu, 10s) < 0) failed++;
      done++;
    });
  REQUIRE(eventually([&] { return sbq.ws_active.load() == kWaiters && sbitmap_queue_stats(&sbq).waits >= kWaiters; }));
  sbitmap_queue_clear_batch(&sbq, 0, held.data(), kWaiters);  // one call, 8 completions
  CHECK(eventually([&] { return done.load() == kWaiters; }));
  for (auto& t : waiters) t.join();
  CHECK(failed.load() == 0);
  CHECK(sbitmap_queue_stats(&sbq).wake_batches == 2);
  CHECK(sbitmap_queue_stats(&sbq).wait_timeouts == 0);
}

// Issue 45: v6.18 __sbitmap_queue_wake_up() stores the index it advanced to (`if (wake_index !=
// atomic_read(&sbq->wake_index)) atomic_set(...)`), so the next wake-up starts at the queue
// after the one just served: a queue need not be emptied before the next one's waiters get a
// turn. Two waiters on ws[0] and one on ws[1], one tag's worth of wake-ups at a time (wake_batch
// 1): the second wake-up goes to ws[1]'s waiter; with the index not stored it would start at
// ws[0] again and wake that queue's second waiter. Single-threaded: the waiters are queued with
// prepare_to_wait and never sleep, so which one a wake-up took is exact.
TEST_CASE("v6.18 __sbitmap_queue_wake_up: the advanced wake_index is stored, so the next wake-up starts at the following wait queue") {
  SbitmapQueue sbq;
  REQUIRE(sbitmap_queue_init_node(&sbq, 8) == 0);
  REQUIRE(sbq.wake_batch.load() == 1);
  REQUIRE(sbq.wake_index.load() == 0);
  SbqWait a0, b0, a1;
  sbitmap_prepare_to_wait(&sbq, &sbq.ws[0], &a0);
  sbitmap_prepare_to_wait(&sbq, &sbq.ws[0], &b0);
  sbitmap_prepare_to_wait(&sbq, &sbq.ws[1], &a1);
  REQUIRE(sbq.ws_active.load() == 3);
  sbitmap_queue_wake_up(&sbq, 1);  // one completion: one wake batch
  CHECK(a0.woken);
  CHECK_FALSE(b0.woken);
  CHECK_FALSE(a1.woken);
  CHECK(sbq.wake_index.load() == 1);  // moved past ws[0]
  sbitmap_queue_wake_up(&sbq, 1);
  CHECK(a1.woken);  // ws[1]'s turn, although ws[0] still has a waiter
  CHECK_FALSE(b0.woken);
  CHECK(sbq.wake_index.load() == 2);
  sbitmap_queue_wake_up(&sbq, 1);  // ws[2..7] empty: round to ws[0]
  CHECK(b0.woken);
  CHECK(sbq.wake_index.load() == 1);
  CHECK(sbitmap_queue_stats(&sbq).wake_batches == 3);
  for (SbqWait* w : {&a0, &b0, &a1}) sbitmap_finish_wait(&sbq, w->ws, w);
  CHECK(sbq.ws_active.load() == 0);
}

TEST_CASE("rule 1: set-up refuses words wider than BITS_PER_LONG, and a resize past the allocated words") {
  Sbitmap sb;
  CHECK(sbitmap_init_node(&sb, 128, 7) == -EINVAL);
  CHECK(sbitmap_init_node(&sb, 128, 6) == 0);  // 64-bit words: the widest
  CHECK(sb.map_capacity == 2);
  SbitmapQueue sbq;
  CHECK(sbitmap_queue_init_node(&sbq, 64, 7) == -EINVAL);
  REQUIRE(sbitmap_queue_init_node(&sbq, 8, 3) == 0);  // one word, capacity 8
  CHECK(sbitmap_queue_resize(&sbq, 9) == -EINVAL);
  CHECK(sbq.sb.depth.load() == 8);  // nothing changed
  CHECK(sbitmap_queue_resize(&sbq, 8) == 0);
  CHECK(sbitmap_resize(&sb, 129) == -EINVAL);
  CHECK(sb.depth.load() == 128);
  CHECK(sbitmap_resize(&sb, 128) == 0);
}
