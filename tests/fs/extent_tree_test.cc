// Extent trees of any depth (fs/extent_tree.h): the index written over a row of leaves reads
// back as the same map and shape at every depth; the reader refuses each inconsistency a
// damaged tree can have; the record of a map's edits says exactly which entries changed.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "fs/extent_tree.h"

using namespace biofs;
using namespace biofs::disk;

namespace {

constexpr uint32_t BS = 1024;  // 41 entries to a node
constexpr uint64_t OWNER = 12;

// Blocks in memory, written as the filesystem writes them: leaves of `fill` extents each (one
// block per extent, every other file block), the index above from write_extent_index.
struct Store {
  std::map<uint64_t, std::vector<uint8_t>> blocks;
  std::vector<Extent> map;
  uint64_t root = 0;
  uint64_t next = 1000;

  std::vector<uint8_t>& node(uint64_t blk, uint16_t level, size_t nr, const void* entries, size_t size) {
    std::vector<uint8_t>& b = blocks[blk];
    b.assign(BS, 0);
    init_extent_node(b.data(), OWNER, level, nr, BS);
    std::memcpy(b.data() + sizeof(ExtentNode), entries, nr * size);
    return b;
  }
  Store(size_t leaves, size_t fill) {
    std::vector<ExtentIndex> children;
    for (size_t l = 0; l < leaves; l++) {
      std::vector<Extent> e;
      for (size_t k = 0; k < fill; k++) {
        const uint64_t i = map.size();
        e.push_back(Extent{2 * i, 5000 + i, 1, 0});
        map.push_back(e.back());
      }
      node(next, 0, e.size(), e.data(), sizeof(Extent));
      children.push_back(ExtentIndex{e[0].lblk, next++, 0});
    }
    std::vector<uint64_t> index;
    for (uint64_t k = 0; k < extent_index_blocks(leaves, extents_per_node(BS)); k++) index.push_back(next++);
    root = index.empty() ? children[0].child : index[0];
    write_extent_index(children, index, extents_per_node(BS),
                       [&](uint64_t blk, uint16_t level, const ExtentIndex* e, size_t nr) {
                         node(blk, level, nr, e, sizeof(ExtentIndex));
                       });
  }
  std::string read(std::vector<Extent>* out, ExtentTreeShape* shape) {
    return read_extent_tree(root, OWNER, BS,
                            [&](uint64_t blk, std::string* why) -> const uint8_t* {
                              auto it = blocks.find(blk);
                              if (it == blocks.end()) {
                                *why = "no block " + std::to_string(blk);
                                return nullptr;
                              }
                              return it->second.data();
                            },
                            out, shape);
  }
  ExtentNode& header(uint64_t blk) { return *reinterpret_cast<ExtentNode*>(blocks.at(blk).data()); }
  ExtentIndex* entries(uint64_t blk) { return reinterpret_cast<ExtentIndex*>(blocks.at(blk).data() + sizeof(ExtentNode)); }
};

bool same(const std::vector<Extent>& a, const std::vector<Extent>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Extent)) == 0;
}

}  // namespace

TEST_CASE("extent tree: the index over 1 to 41*41+1 leaves reads back as the same map, levels as small as they can be") {
  const uint32_t per = extents_per_node(BS);
  CHECK(extent_index_levels(1, per).empty());
  CHECK(extent_index_levels(per, per) == std::vector<uint64_t>{1});
  CHECK(extent_index_levels(per + 1, per) == (std::vector<uint64_t>{2, 1}));
  CHECK(extent_index_levels(per * per + 1, per) == (std::vector<uint64_t>{per + 1, 2, 1}));
  for (size_t leaves : {size_t(1), size_t(2), size_t(per), size_t(per + 1), size_t(per * per + 1)}) {
    CAPTURE(leaves);
    Store s(leaves, 3);
    std::vector<Extent> got;
    ExtentTreeShape shape;
    REQUIRE(s.read(&got, &shape) == "");
    CHECK(same(got, s.map));
    CHECK(shape.leaves.size() == leaves);
    CHECK(shape.index.size() == extent_index_blocks(leaves, per));
    CHECK(s.header(s.root).level == extent_index_levels(leaves, per).size());
    if (!shape.index.empty()) CHECK(shape.index[0] == s.root);
  }
  CHECK(extent_tree_blocks(INLINE_EXTENTS, BS) == 0);
  CHECK(extent_tree_blocks(per, BS) == 1);
  CHECK(extent_tree_blocks(per * per + 1, BS) == (per + 1) + 2 + 1);
}

TEST_CASE("extent tree: the reader refuses a wrong index key, order, level, owner, an empty node and a root too deep") {
  const uint32_t per = extents_per_node(BS);
  const auto fails = [](Store& s) {
    std::vector<Extent> got;
    ExtentTreeShape shape;
    return !s.read(&got, &shape).empty();
  };
  {
    Store s(per + 1, 2);  // root (level 2) over two index nodes over leaves
    const uint64_t mid = s.entries(s.root)[1].child;
    s.entries(mid)[0].lblk++;  // not its child's first block
    CHECK(fails(s));
  }
  {
    Store s(per + 1, 2);
    s.entries(s.root)[1].lblk = s.entries(s.root)[0].lblk;  // not in order (and a wrong key)
    CHECK(fails(s));
  }
  {
    Store s(per + 1, 2);
    s.header(s.entries(s.root)[0].child).level = 0;  // an index node claiming to be a leaf
    CHECK(fails(s));
  }
  {
    Store s(3, 2);
    s.header(s.entries(s.root)[2].child).owner = OWNER + 1;
    CHECK(fails(s));
  }
  {
    Store s(3, 2);
    s.header(s.entries(s.root)[2].child).nr = 0;  // an empty leaf below the root
    CHECK(fails(s));
  }
  {
    Store s(3, 2);
    s.header(s.root).level = MAX_EXTENT_DEPTH + 1;
    CHECK(fails(s));
  }
  {
    Store s(3, 2);
    s.blocks.erase(s.entries(s.root)[1].child);  // the reader's own error comes through
    std::vector<Extent> got;
    ExtentTreeShape shape;
    CHECK(s.read(&got, &shape).find("no block") != std::string::npos);
  }
}

TEST_CASE("extent tree: a map's edits cover every changed entry, and those outside only moved") {
  // Entries carry their original position; after random splices, entries before `lo` are the
  // originals in place and entries from `hi` on are the originals shifted by `delta`.
  std::mt19937_64 rng(5);
  for (int round = 0; round < 200; round++) {
    std::vector<long> v(50 + rng() % 200);
    for (size_t i = 0; i < v.size(); i++) v[i] = long(i);
    const std::vector<long> orig = v;
    ExtentEdits e;
    long fresh = -1;
    const int splices = 1 + int(rng() % 6);
    for (int k = 0; k < splices; k++) {
      const size_t at = rng() % (v.size() + 1);
      const size_t old_n = std::min<size_t>(rng() % 4, v.size() - at), new_n = rng() % 4;
      v.erase(v.begin() + long(at), v.begin() + long(at + old_n));
      for (size_t i = 0; i < new_n; i++) v.insert(v.begin() + long(at), fresh--);
      e.splice(at, old_n, new_n);
    }
    REQUIRE(!e.empty());
    REQUIRE(e.lo <= e.hi);
    REQUIRE(e.hi <= v.size());
    CHECK(ptrdiff_t(v.size()) - ptrdiff_t(orig.size()) == e.delta);
    for (size_t i = 0; i < e.lo; i++) CHECK(v[i] == orig[i]);
    for (size_t i = e.hi; i < v.size(); i++) CHECK(v[i] == orig[size_t(ptrdiff_t(i) - e.delta)]);
  }
}
