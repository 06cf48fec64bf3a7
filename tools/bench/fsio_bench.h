// `biofs-bench fsio`: the filesystem's file I/O path in-process, a fixed number of I/Os (for
// instruction counts under Valgrind: tools/biofs-instructions).
#pragma once

namespace biofs::bench {
int fsio_main(int argc, char** argv);  // argv[0] is the mode name
}
