// libFuzzer's entry point for one harness (BIOFS_FUZZ_TARGET names it; fuzz_targets.h).
#include "fuzz_image.h"
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Build both images before the first input, so no input is charged for them.
  biofs::fuzz::clean_image();
  biofs::fuzz::crash_image();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return biofs::fuzz::BIOFS_FUZZ_TARGET(data, size);
}
