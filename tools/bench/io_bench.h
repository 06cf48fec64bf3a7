// `biofs-bench` (the default mode): the block core alone in the manner of fio's t/io_uring.
#pragma once

namespace biofs::bench {
int io_main(int argc, char** argv);  // argv[0] is the mode name or the program
}
