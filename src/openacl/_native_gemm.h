/* The float32 GEMM of _native_gemm.c: its flags and the methods it adds to the module. */
#ifndef OPENACL_NATIVE_GEMM_H
#define OPENACL_NATIVE_GEMM_H

#include <Python.h>
#include <stddef.h>

#define GEMM_LEFT 0  /* the left operand, A (M x K) */
#define GEMM_RIGHT 1 /* the right operand, B (K x N) */

#define GEMM_RELU 1              /* the activation (low bits): 0 none, 1 ReLU */
#define GEMM_ACTIVATION_MASK 15
#define GEMM_BIAS_ROWS 16        /* the bias holds one value per row (else per column) */
#define GEMM_ACCUMULATE 32       /* out += A @ B */

extern PyMethodDef native_gemm_methods[];

/* The vector ISA in use ("avx512", "avx2" or "baseline"): the GEMM's, which the other
 * per-ISA kernels (the convolution's tap sums) follow, so gemm_set_isa switches them all. */
const char *gemm_isa_name(void);

#endif
