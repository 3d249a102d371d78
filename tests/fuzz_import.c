/* fuzz_import.c - libFuzzer harness: import any bytes as an ONNX model, then
 * run shape inference on what imports. Must never crash, hang or leak.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DMEMPLAN_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_import
 *   build-fuzz/tests/fuzz_import -max_len=65536 -timeout=10 corpus/   (see docs/fuzzing.md)
 */
#include <stddef.h>
#include <stdint.h>

#include "frontend/infer.h"
#include "frontend/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mp_err err;
    mp_model *m = mp_onnx_load_buffer(data, size, ".", &err);
    if (!m) return 0;
    mp_infer(m->graph, &err);
    mp_onnx_close(m);
    return 0;
}
