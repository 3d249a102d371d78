/* mp_cu_cudnn.h - the GPU runtime's convolutions on cuDNN (mp_cu_cudnn.cu):
 *
 *   mp_cu_cudnn_init(plan, ws, plan->conv_workspace_bytes, tf32);
 *   if (!mp_cu_cudnn_conv(plan, I, &args)) launch the direct kernel;   // MP_CU_CONV, _DX, _DW
 *   mp_cu_cudnn_free();
 */
#ifndef MP_CU_CUDNN_H
#define MP_CU_CUDNN_H

#include "mp_cu_kernels.h"

void mp_cu_cudnn_init(const mp_cu_plan *p, void *ws, size_t ws_bytes, int tf32);
/* 1 when cuDNN ran the instruction, 0 when the caller must run the direct kernel. */
int mp_cu_cudnn_conv(const mp_cu_plan *p, const mp_cu_instr *I, const mp_cu_args *a);
/* Convolution instructions set up so far: on cuDNN, on the direct kernels. */
void mp_cu_cudnn_counts(int *on, int *direct);
void mp_cu_cudnn_free(void);

#endif
