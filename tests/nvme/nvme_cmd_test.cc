// nvme_setup_cmd(): every block op becomes the NVMe command the specification describes, with
// CID = tag; the uring passthrough encoding of a command and its data; Identify commands.
#include <doctest/doctest.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>

#include <cstring>
#include <memory>

#include "nvme/nvme_cmd.h"

using namespace biofs;

namespace {

alignas(PAGE_SIZE) uint8_t buf[256 * PAGE_SIZE];

// A request with its NvmeIod behind it, as the tag set lays them out, and one bio.
struct FakeRq {
  Request rq;
  NvmeIod iod;
  Bio bio;
  BioVec vecs[NVME_MAX_SEGS + 2];

  FakeRq(blk_opf_t opf, sector_t sector, uint32_t bytes, int tag = 7) {
    std::memset(static_cast<void*>(&rq), 0, sizeof(rq));
    rq.tag = tag;
    rq.cmd_flags = opf;
    rq.__sector = sector;
    rq.__data_len = bytes;
    bio_init(&bio, nullptr, vecs, NVME_MAX_SEGS + 2, opf);
    bio.bi_iter.bi_sector = sector;
    rq.bio = rq.biotail = &bio;
  }
  void add(uint8_t* p, uint32_t len) { REQUIRE(bio_add_virt(&bio, p, len) == len); }
  void no_data(uint32_t len) { bio.bi_iter.bi_size = len; }
};
static_assert(offsetof(FakeRq, iod) == sizeof(Request), "the iod is the request's pdu");

NvmeNsInfo ns512{.nsid = 3, .lba_shift = 9, .nsze = 1 << 20};
NvmeNsInfo ns4k{.nsid = 1, .lba_shift = 12, .nsze = 1 << 20};

}  // namespace

TEST_CASE("read: opcode, CID = tag, nsid, SLBA and 0-based NLB in 512-byte blocks, one data vec") {
  auto f = std::make_unique<FakeRq>(REQ_OP_READ, 8, 4096, 42);
  f->add(buf, 4096);
  REQUIRE(blk_mq_rq_to_pdu(&f->rq) == &f->iod);
  REQUIRE(nvme_setup_cmd(ns512, &f->rq, nvme_iod(&f->rq)) == BLK_STS_OK);
  const NvmeCommand& c = f->iod.cmd;
  CHECK(c.opcode == nvme_cmd_read);
  CHECK(c.command_id == 42);
  CHECK(c.nsid == 3);
  CHECK(c.flags == 0);
  CHECK(nvme_cmd_slba(c) == 8);
  CHECK(c.cdw10 == 8);
  CHECK(c.cdw11 == 0);
  CHECK(c.cdw12 == 7);  // 8 blocks, 0-based
  CHECK(nvme_cmd_nlb(c) == 8);
  CHECK(c.prp1 == 0);
  CHECK(c.prp2 == 0);
  CHECK(f->iod.nr_vecs == 1);
  CHECK(f->iod.data_len == 4096);
  CHECK(f->iod.vecs[0].iov_base == buf);
  CHECK(f->iod.vecs[0].iov_len == 4096);
}

TEST_CASE("write in 4096-byte blocks: SLBA and NLB in the namespace's block size, SLBA above 32 bits") {
  const sector_t sector = (uint64_t(5) << 32) * 8;  // LBA 5 << 32
  auto f = std::make_unique<FakeRq>(REQ_OP_WRITE, sector, 3 * 4096, 0);
  f->add(buf, 3 * 4096);
  NvmeNsInfo big = ns4k;
  big.nsze = uint64_t(1) << 40;
  REQUIRE(nvme_setup_cmd(big, &f->rq, &f->iod) == BLK_STS_OK);
  const NvmeCommand& c = f->iod.cmd;
  CHECK(c.opcode == nvme_cmd_write);
  CHECK(c.command_id == 0);
  CHECK(nvme_cmd_slba(c) == uint64_t(5) << 32);
  CHECK(c.cdw10 == 0);
  CHECK(c.cdw11 == 5);
  CHECK((c.cdw12 & 0xFFFF) == 2);
  CHECK((c.cdw12 & NVME_RW_FUA) == 0);
}

TEST_CASE("FUA and fail-fast set the FUA and limited-retry bits of cdw12") {
  auto f = std::make_unique<FakeRq>(REQ_OP_WRITE | REQ_FUA | REQ_FAILFAST, 0, 512);
  f->add(buf, 512);
  REQUIRE(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_OK);
  CHECK((f->iod.cmd.cdw12 & NVME_RW_FUA) != 0);
  CHECK((f->iod.cmd.cdw12 & NVME_RW_LR) != 0);
  CHECK((f->iod.cmd.cdw12 & 0xFFFF) == 0);
}

TEST_CASE("flush: opcode 0 and the namespace, nothing else") {
  auto f = std::make_unique<FakeRq>(REQ_OP_FLUSH, 0, 0, 9);
  f->iod.cmd.cdw10 = 0xdead;  // stale contents are cleared
  REQUIRE(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_OK);
  const NvmeCommand& c = f->iod.cmd;
  CHECK(c.opcode == nvme_cmd_flush);
  CHECK(c.command_id == 9);
  CHECK(c.nsid == 3);
  CHECK(c.cdw10 == 0);
  CHECK(c.cdw12 == 0);
  CHECK(f->iod.nr_vecs == 0);
  CHECK(f->iod.data_len == 0);
}

TEST_CASE("write zeroes: SLBA/NLB like a write, no data") {
  auto f = std::make_unique<FakeRq>(REQ_OP_WRITE_ZEROES, 64, 32 * 4096);
  f->no_data(32 * 4096);
  REQUIRE(nvme_setup_cmd(ns4k, &f->rq, &f->iod) == BLK_STS_OK);
  const NvmeCommand& c = f->iod.cmd;
  CHECK(c.opcode == nvme_cmd_write_zeroes);
  CHECK(nvme_cmd_slba(c) == 8);
  CHECK(nvme_cmd_nlb(c) == 32);
  CHECK(f->iod.nr_vecs == 0);
}

TEST_CASE("discard: Dataset Management, deallocate, one range with a 1-based length as data") {
  auto f = std::make_unique<FakeRq>(REQ_OP_DISCARD, 1024, 1u << 20, 5);
  f->no_data(1u << 20);
  REQUIRE(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_OK);
  const NvmeCommand& c = f->iod.cmd;
  CHECK(c.opcode == nvme_cmd_dsm);
  CHECK(c.command_id == 5);
  CHECK(c.cdw10 == 0);  // one range
  CHECK(c.cdw11 == NVME_DSMGMT_AD);
  CHECK(f->iod.dsm.slba == 1024);
  CHECK(f->iod.dsm.nlb == 2048);  // not 0-based
  CHECK(f->iod.dsm.cattr == 0);
  CHECK(f->iod.nr_vecs == 1);
  CHECK(f->iod.vecs[0].iov_base == &f->iod.dsm);
  CHECK(f->iod.vecs[0].iov_len == sizeof(NvmeDsmRange));
  CHECK(f->iod.data_len == 16);
}

TEST_CASE("requests a command cannot express are refused") {
  SUBCASE("sector not on a 4096-byte block") {
    auto f = std::make_unique<FakeRq>(REQ_OP_READ, 1, 4096);
    f->add(buf, 4096);
    CHECK(nvme_setup_cmd(ns4k, &f->rq, &f->iod) == BLK_STS_IOERR);
  }
  SUBCASE("length not a whole block") {
    auto f = std::make_unique<FakeRq>(REQ_OP_WRITE, 0, 512);
    f->add(buf, 512);
    CHECK(nvme_setup_cmd(ns4k, &f->rq, &f->iod) == BLK_STS_IOERR);
  }
  SUBCASE("more blocks than the 16-bit NLB holds") {
    auto f = std::make_unique<FakeRq>(REQ_OP_WRITE_ZEROES, 0, (NVME_MAX_NLB + 1) * 512);
    f->no_data((NVME_MAX_NLB + 1) * 512);
    CHECK(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_IOERR);
  }
  SUBCASE("zero length read") {
    auto f = std::make_unique<FakeRq>(REQ_OP_READ, 0, 0);
    CHECK(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_IOERR);
  }
  SUBCASE("data that does not add up to the request's length") {
    auto f = std::make_unique<FakeRq>(REQ_OP_READ, 0, 8192);
    f->add(buf, 4096);
    CHECK(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_IOERR);
  }
  SUBCASE("more segments than NVME_MAX_SEGS") {
    const uint32_t n = NVME_MAX_SEGS + 1;
    auto f = std::make_unique<FakeRq>(REQ_OP_READ, 0, n * 512);
    for (uint32_t i = 0; i < n; i++) f->add(buf + 2 * i * 512, 512);  // gaps: never merged
    CHECK(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_IOERR);
  }
}

TEST_CASE("data vecs: contiguous bvecs merge, gaps start a new vec, chained bios are walked") {
  auto f = std::make_unique<FakeRq>(REQ_OP_WRITE, 0, 5 * 4096);
  f->add(buf, 4096);
  REQUIRE(bio_add_page(&f->bio, buf + 4096, 4096, 0) == 4096);  // contiguous: merges
  f->add(buf + 4 * 4096, 4096);                                 // gap
  Bio second;
  BioVec second_vecs[2];
  bio_init(&second, nullptr, second_vecs, 2, REQ_OP_WRITE);
  REQUIRE(bio_add_virt(&second, buf + 5 * 4096, 8192) == 8192);  // contiguous with the last
  f->bio.bi_next = &second;
  f->rq.biotail = &second;
  REQUIRE(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_OK);
  REQUIRE(f->iod.nr_vecs == 2);
  CHECK(f->iod.vecs[0].iov_base == buf);
  CHECK(f->iod.vecs[0].iov_len == 8192);
  CHECK(f->iod.vecs[1].iov_base == buf + 4 * 4096);
  CHECK(f->iod.vecs[1].iov_len == 3 * 4096);
  CHECK(f->iod.data_len == 5 * 4096);
}

TEST_CASE("a cloned bio's data is read through its iterator") {
  auto f = std::make_unique<FakeRq>(REQ_OP_READ, 0, 4096);
  f->add(buf, 4096);
  f->add(buf + 8 * 4096, 4096);
  // As a split leaves it: only the second vec remains, the bio's iterator starts there.
  f->bio.bi_iter.bi_idx = 1;
  f->bio.bi_iter.bi_size = 4096;
  REQUIRE(nvme_setup_cmd(ns512, &f->rq, &f->iod) == BLK_STS_OK);
  REQUIRE(f->iod.nr_vecs == 1);
  CHECK(f->iod.vecs[0].iov_base == buf + 8 * 4096);
}

TEST_CASE("uring passthrough encoding: one vec as a buffer, several as an iovec array") {
  NvmeCommand c{};
  c.opcode = nvme_cmd_write;
  c.flags = 0;
  c.command_id = 17;
  c.nsid = 2;
  c.cdw2 = 0x22;
  c.cdw3 = 0x33;
  c.cdw10 = 0xA;
  c.cdw11 = 0xB;
  c.cdw12 = 0xC | NVME_RW_FUA;
  c.cdw13 = 0xD;
  c.cdw14 = 0xE;
  c.cdw15 = 0xF;
  nvme_uring_cmd u;
  uint32_t op = 0;
  iovec one{buf, 8192};
  nvme_uring_cmd_prep(c, &one, 1, &u, &op);
  CHECK(op == NVME_URING_CMD_IO);
  CHECK(u.opcode == nvme_cmd_write);
  CHECK(u.nsid == 2);
  CHECK(u.cdw2 == 0x22);
  CHECK(u.cdw3 == 0x33);
  CHECK(u.cdw10 == 0xA);
  CHECK(u.cdw11 == 0xB);
  CHECK(u.cdw12 == (0xC | NVME_RW_FUA));
  CHECK(u.cdw13 == 0xD);
  CHECK(u.cdw14 == 0xE);
  CHECK(u.cdw15 == 0xF);
  CHECK(u.addr == reinterpret_cast<uintptr_t>(buf));
  CHECK(u.data_len == 8192);
  CHECK(u.metadata == 0);
  CHECK(u.metadata_len == 0);
  CHECK(u.timeout_ms == 0);

  iovec two[2] = {{buf, 4096}, {buf + 3 * 4096, 4096}};
  nvme_uring_cmd_prep(c, two, 2, &u, &op);
  CHECK(op == NVME_URING_CMD_IO_VEC);
  CHECK(u.addr == reinterpret_cast<uintptr_t>(two));
  CHECK(u.data_len == 2);

  NvmeCommand flush{};
  flush.opcode = nvme_cmd_flush;
  flush.nsid = 1;
  nvme_uring_cmd_prep(flush, nullptr, 0, &u, &op);
  CHECK(op == NVME_URING_CMD_IO);
  CHECK(u.addr == 0);
  CHECK(u.data_len == 0);
}

TEST_CASE("identify commands and the LBA format index") {
  const NvmeCommand ctrl = nvme_identify_cmd(NVME_ID_CNS_CTRL, 0);
  CHECK(ctrl.opcode == nvme_admin_identify);
  CHECK(ctrl.nsid == 0);
  CHECK(ctrl.cdw10 == 1);
  const NvmeCommand ns = nvme_identify_cmd(NVME_ID_CNS_NS, 4);
  CHECK(ns.nsid == 4);
  CHECK(ns.cdw10 == 0);
  CHECK(nvme_lbaf_index(0x01) == 1);
  CHECK(nvme_lbaf_index(0x11) == 1);         // bit 4 is the metadata layout, not the index
  CHECK(nvme_lbaf_index(0x60 | 0x02) == 0x32);  // bits 6:5 are index bits 5:4
  CHECK(std::string(nvme_opcode_name(nvme_cmd_dsm)) == "DSM");
}
