// Counterpart of include/linux/nvme.h: the NVMe structures and constants biofs uses, written
// from the NVM Express Base and NVM Command Set specifications. The 64-byte submission queue
// entry, the 16-byte completion queue entry, the I/O and admin opcodes we send, and the fields
// of the Identify Controller and Identify Namespace data structures the driver reads.
//
// NVMe is little-endian on the wire; biofs runs on little-endian hosts only (asserted below),
// so the structures are used as plain integers.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace biofs {

static_assert(std::endian::native == std::endian::little, "NVMe structures are little-endian");

// ---- opcodes -------------------------------------------------------------------------------

enum NvmeOpcode : uint8_t {  // enum nvme_opcode (NVM command set)
  nvme_cmd_flush = 0x00,
  nvme_cmd_write = 0x01,
  nvme_cmd_read = 0x02,
  nvme_cmd_write_zeroes = 0x08,
  nvme_cmd_dsm = 0x09,
};

enum NvmeAdminOpcode : uint8_t {  // enum nvme_admin_opcode (the one we send)
  nvme_admin_identify = 0x06,
};

// Identify CNS values (cdw10 bits 7:0).
inline constexpr uint8_t NVME_ID_CNS_NS = 0x00;
inline constexpr uint8_t NVME_ID_CNS_CTRL = 0x01;
inline constexpr uint32_t NVME_IDENTIFY_DATA_SIZE = 4096;

// ---- the submission queue entry ------------------------------------------------------------

// struct nvme_common_command / struct nvme_command: 64 bytes. The dword names follow the
// specification; typed views for the commands we build are the helpers below.
struct NvmeCommand {
  uint8_t opcode;
  uint8_t flags;        // fused operation, PSDT (PRP or SGL): 0 = PRPs
  uint16_t command_id;  // CID: the request's tag
  uint32_t nsid;
  uint32_t cdw2;
  uint32_t cdw3;
  uint64_t metadata;    // MPTR
  uint64_t prp1;        // DPTR: data pointer, PRP entry 1 ...
  uint64_t prp2;        // ... and PRP entry 2 (or a PRP list)
  uint32_t cdw10;
  uint32_t cdw11;
  uint32_t cdw12;
  uint32_t cdw13;
  uint32_t cdw14;
  uint32_t cdw15;
};
static_assert(sizeof(NvmeCommand) == 64);
static_assert(offsetof(NvmeCommand, command_id) == 2);
static_assert(offsetof(NvmeCommand, nsid) == 4);
static_assert(offsetof(NvmeCommand, metadata) == 16);
static_assert(offsetof(NvmeCommand, prp1) == 24);
static_assert(offsetof(NvmeCommand, prp2) == 32);
static_assert(offsetof(NvmeCommand, cdw10) == 40);
static_assert(offsetof(NvmeCommand, cdw15) == 60);

// Read, Write, Write Zeroes: SLBA in cdw10 (low) and cdw11 (high); cdw12 holds NLB, 0-based,
// in bits 15:0 and the control bits above.
inline uint64_t nvme_cmd_slba(const NvmeCommand& c) { return uint64_t(c.cdw11) << 32 | c.cdw10; }
inline void nvme_cmd_set_slba(NvmeCommand& c, uint64_t slba) {
  c.cdw10 = uint32_t(slba);
  c.cdw11 = uint32_t(slba >> 32);
}
inline uint32_t nvme_cmd_nlb(const NvmeCommand& c) { return (c.cdw12 & 0xFFFF) + 1; }  // 1-based
inline constexpr uint32_t NVME_RW_LR = 1u << 31;            // limited retry
inline constexpr uint32_t NVME_RW_FUA = 1u << 30;           // force unit access
inline constexpr uint32_t NVME_WZ_DEAC = 1u << 25;          // write zeroes: deallocate
inline constexpr uint32_t NVME_MAX_NLB = 65536;             // the 16-bit 0-based NLB field

// Dataset Management: cdw10 bits 7:0 = number of ranges, 0-based; cdw11 = attributes.
inline constexpr uint32_t NVME_DSMGMT_IDR = 1u << 0;
inline constexpr uint32_t NVME_DSMGMT_IDW = 1u << 1;
inline constexpr uint32_t NVME_DSMGMT_AD = 1u << 2;         // deallocate
inline constexpr unsigned NVME_DSM_MAX_RANGES = 256;
struct NvmeDsmRange {  // struct nvme_dsm_range
  uint32_t cattr;  // context attributes
  uint32_t nlb;    // length in logical blocks (1-based, unlike the I/O commands' NLB)
  uint64_t slba;
};
static_assert(sizeof(NvmeDsmRange) == 16);

// Identify: cdw10 bits 7:0 CNS, 31:16 CNTID; cdw11 bits 31:24 CSI.

// ---- the completion queue entry ------------------------------------------------------------

struct NvmeCompletion {  // struct nvme_completion
  uint32_t result;       // command specific, dword 0
  uint32_t result_hi;    // dword 1
  uint16_t sq_head;
  uint16_t sq_id;
  uint16_t command_id;
  uint16_t status;       // bit 0: phase tag; bits 15:1: the status field
};
static_assert(sizeof(NvmeCompletion) == 16);
static_assert(offsetof(NvmeCompletion, command_id) == 12);
static_assert(offsetof(NvmeCompletion, status) == 14);

// The status field as the kernel keeps it (nvme_req(req)->status = cqe.status >> 1):
// bits 7:0 SC, 10:8 SCT, 12:11 CRD, 13 More, 14 DNR. The constants are SCT << 8 | SC.
inline constexpr uint16_t NVME_SCT_SC_MASK = 0x7FF;
inline constexpr uint16_t NVME_SCT_MASK = 0x700;
inline constexpr uint16_t NVME_STATUS_DNR = 0x4000;
inline constexpr uint16_t NVME_STATUS_MORE = 0x2000;
inline constexpr uint16_t NVME_STATUS_CRD = 0x1800;
inline constexpr unsigned nvme_status_sct(uint16_t status) { return (status >> 8) & 0x7; }
inline constexpr unsigned nvme_status_sc(uint16_t status) { return status & 0xFF; }

enum : uint16_t {
  // Generic command status (SCT 0).
  NVME_SC_SUCCESS = 0x0,
  NVME_SC_INVALID_OPCODE = 0x1,
  NVME_SC_INVALID_FIELD = 0x2,
  NVME_SC_CMDID_CONFLICT = 0x3,
  NVME_SC_DATA_XFER_ERROR = 0x4,
  NVME_SC_POWER_LOSS = 0x5,
  NVME_SC_INTERNAL = 0x6,
  NVME_SC_ABORT_REQ = 0x7,
  NVME_SC_ABORT_QUEUE = 0x8,
  NVME_SC_FUSED_FAIL = 0x9,
  NVME_SC_FUSED_MISSING = 0xA,
  NVME_SC_INVALID_NS = 0xB,
  NVME_SC_CMD_SEQ_ERROR = 0xC,
  NVME_SC_SGL_INVALID_LAST = 0xD,
  NVME_SC_SGL_INVALID_COUNT = 0xE,
  NVME_SC_SGL_INVALID_DATA = 0xF,  // Data SGL Length Invalid
  NVME_SC_SGL_INVALID_METADATA = 0x10,
  NVME_SC_SGL_INVALID_TYPE = 0x11,
  NVME_SC_PRP_INVALID_OFFSET = 0x13,
  NVME_SC_NS_WRITE_PROTECTED = 0x20,
  NVME_SC_CMD_INTERRUPTED = 0x21,
  NVME_SC_TRANSIENT_TR_ERR = 0x22,
  NVME_SC_LBA_RANGE = 0x80,
  NVME_SC_CAP_EXCEEDED = 0x81,
  NVME_SC_NS_NOT_READY = 0x82,
  NVME_SC_RESERVATION_CONFLICT = 0x83,
  // Command specific status (SCT 1).
  NVME_SC_CONFLICTING_ATTRS = 0x180,
  NVME_SC_INVALID_PI = 0x181,
  NVME_SC_READ_ONLY = 0x182,
  NVME_SC_ONCS_NOT_SUPPORTED = 0x183,
  // Media and data integrity errors (SCT 2).
  NVME_SC_WRITE_FAULT = 0x280,
  NVME_SC_READ_ERROR = 0x281,
  NVME_SC_GUARD_CHECK = 0x282,
  NVME_SC_APPTAG_CHECK = 0x283,
  NVME_SC_REFTAG_CHECK = 0x284,
  NVME_SC_COMPARE_FAILED = 0x285,
  NVME_SC_ACCESS_DENIED = 0x286,
  NVME_SC_UNWRITTEN_BLOCK = 0x287,
  // Path related status (SCT 3).
  NVME_SC_INTERNAL_PATH_ERROR = 0x300,
  NVME_SC_ANA_PERSISTENT_LOSS = 0x301,
  NVME_SC_ANA_INACCESSIBLE = 0x302,
  NVME_SC_ANA_TRANSITION = 0x303,
  NVME_SC_CTRL_PATH_ERROR = 0x360,
  NVME_SC_HOST_PATH_ERROR = 0x370,
  NVME_SC_HOST_ABORTED_CMD = 0x371,
};

// ---- Identify Controller (CNS 01h) ---------------------------------------------------------

struct NvmeIdCtrl {  // struct nvme_id_ctrl: the fields biofs reads, the rest reserved
  uint16_t vid;
  uint16_t ssvid;
  char sn[20];
  char mn[40];
  char fr[8];
  uint8_t rab;
  uint8_t ieee[3];
  uint8_t cmic;
  uint8_t mdts;       // max data transfer: 2^mdts minimum pages (CAP.MPSMIN, 4 KiB); 0 = none
  uint16_t cntlid;
  uint32_t ver;
  uint8_t rsvd84[172];
  uint16_t oacs;      // 256
  uint8_t rsvd258[254];
  uint8_t sqes;       // 512: required (3:0) and maximum (7:4) SQ entry size, log2
  uint8_t cqes;
  uint16_t maxcmd;
  uint32_t nn;        // number of namespaces
  uint16_t oncs;      // 520: optional NVM command support
  uint16_t fuses;
  uint8_t fna;
  uint8_t vwc;        // 525: bit 0 = volatile write cache present
  uint16_t awun;
  uint16_t awupf;
  uint8_t icsvscc;
  uint8_t nwpc;
  uint16_t acwu;
  uint16_t ocfs;
  uint32_t sgls;      // 536
  uint32_t mnan;
  uint8_t rsvd544[224];
  char subnqn[256];   // 768
  uint8_t rsvd1024[1024];
  uint8_t psd[1024];  // 2048: power state descriptors
  uint8_t vs[1024];   // 3072
};
static_assert(sizeof(NvmeIdCtrl) == NVME_IDENTIFY_DATA_SIZE);
static_assert(offsetof(NvmeIdCtrl, sn) == 4);
static_assert(offsetof(NvmeIdCtrl, mn) == 24);
static_assert(offsetof(NvmeIdCtrl, fr) == 64);
static_assert(offsetof(NvmeIdCtrl, mdts) == 77);
static_assert(offsetof(NvmeIdCtrl, ver) == 80);
static_assert(offsetof(NvmeIdCtrl, oacs) == 256);
static_assert(offsetof(NvmeIdCtrl, sqes) == 512);
static_assert(offsetof(NvmeIdCtrl, nn) == 516);
static_assert(offsetof(NvmeIdCtrl, oncs) == 520);
static_assert(offsetof(NvmeIdCtrl, vwc) == 525);
static_assert(offsetof(NvmeIdCtrl, sgls) == 536);
static_assert(offsetof(NvmeIdCtrl, subnqn) == 768);
static_assert(offsetof(NvmeIdCtrl, psd) == 2048);

inline constexpr uint16_t NVME_CTRL_ONCS_COMPARE = 1u << 0;
inline constexpr uint16_t NVME_CTRL_ONCS_WRITE_UNCORRECTABLE = 1u << 1;
inline constexpr uint16_t NVME_CTRL_ONCS_DSM = 1u << 2;
inline constexpr uint16_t NVME_CTRL_ONCS_WRITE_ZEROES = 1u << 3;
inline constexpr uint8_t NVME_CTRL_VWC_PRESENT = 1u << 0;
inline constexpr unsigned NVME_CTRL_PAGE_SHIFT = 12;  // CAP.MPSMIN as every controller has it
inline constexpr uint32_t NVME_CTRL_PAGE_SIZE = 1u << NVME_CTRL_PAGE_SHIFT;

// ---- Identify Namespace (CNS 00h) ----------------------------------------------------------

struct NvmeLbaf {  // struct nvme_lbaf
  uint16_t ms;     // metadata bytes per block
  uint8_t ds;      // LBADS: log2 of the data size
  uint8_t rp;      // relative performance
};
static_assert(sizeof(NvmeLbaf) == 4);

struct NvmeIdNs {  // struct nvme_id_ns
  uint64_t nsze;   // namespace size in logical blocks
  uint64_t ncap;   // capacity
  uint64_t nuse;   // utilisation
  uint8_t nsfeat;
  uint8_t nlbaf;   // number of LBA formats, 0-based
  uint8_t flbas;   // formatted LBA size: index (bits 3:0, 6:5), extended metadata (bit 4)
  uint8_t mc;
  uint8_t dpc;
  uint8_t dps;
  uint8_t nmic;
  uint8_t rescap;
  uint8_t fpi;
  uint8_t dlfeat;  // 33: bits 2:0 = 001b: deallocated blocks read as zeroes
  uint16_t nawun;
  uint16_t nawupf;
  uint16_t nacwu;
  uint16_t nabsn;
  uint16_t nabo;
  uint16_t nabspf;
  uint16_t noiob;
  uint8_t nvmcap[16];
  uint16_t npwg;
  uint16_t npwa;
  uint16_t npdg;
  uint16_t npda;
  uint16_t nows;
  uint8_t rsvd74[18];
  uint32_t anagrpid;  // 92
  uint8_t rsvd96[3];
  uint8_t nsattr;
  uint16_t nvmsetid;
  uint16_t endgid;
  uint8_t nguid[16];
  uint8_t eui64[8];
  NvmeLbaf lbaf[64];  // 128
  uint8_t vs[3712];   // 384
};
static_assert(sizeof(NvmeIdNs) == NVME_IDENTIFY_DATA_SIZE);
static_assert(offsetof(NvmeIdNs, nlbaf) == 25);
static_assert(offsetof(NvmeIdNs, flbas) == 26);
static_assert(offsetof(NvmeIdNs, dlfeat) == 33);
static_assert(offsetof(NvmeIdNs, npwg) == 64);
static_assert(offsetof(NvmeIdNs, anagrpid) == 92);
static_assert(offsetof(NvmeIdNs, nguid) == 104);
static_assert(offsetof(NvmeIdNs, lbaf) == 128);
static_assert(offsetof(NvmeIdNs, vs) == 384);

inline constexpr uint8_t NVME_NS_FLBAS_LBA_MASK = 0x0F;
inline constexpr uint8_t NVME_NS_FLBAS_LBA_UMASK = 0x60;
inline constexpr uint8_t NVME_NS_FLBAS_META_EXT = 0x10;
// nvme_lbaf_index(): the format in use, from FLBAS bits 3:0 and (above 16 formats) 6:5.
inline constexpr unsigned nvme_lbaf_index(uint8_t flbas) {
  return (flbas & NVME_NS_FLBAS_LBA_MASK) | ((flbas & NVME_NS_FLBAS_LBA_UMASK) >> 1);
}

}  // namespace biofs
