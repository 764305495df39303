/* The float32 GEMM of _native_gemm.c: its flags and the methods it adds to the module. */
#ifndef OPENACL_NATIVE_GEMM_H
#define OPENACL_NATIVE_GEMM_H

#include <Python.h>
#include <stddef.h>

#define GEMM_LEFT 0  /* the left operand, A (M x K) */
#define GEMM_RIGHT 1 /* the right operand, B (K x N) */

/* the activation (low bits), applied to each finished tile: 0 none, then these */
#define GEMM_RELU 1
#define GEMM_HARDSWISH 2
#define GEMM_SIGMOID 3
#define GEMM_SILU 4
#define GEMM_LEAKY_RELU 5 /* slope: the call's alpha */
#define GEMM_GELU_ERF 6   /* GELU's erf form */
#define GEMM_LAST_ACTIVATION GEMM_GELU_ERF
#define GEMM_ACTIVATION_MASK 15
#define GEMM_BIAS_ROWS 16        /* the bias holds one value per row (else per column) */
#define GEMM_ACCUMULATE 32       /* out += A @ B */

extern PyMethodDef native_gemm_methods[];

/* out[0:count) = the activation of in[0:count) (in may be out), `alpha` its parameter: the
 * elementwise operators' own loops (_native.c), so that an activation fused into a GEMM or
 * a convolution gives the bits of the standalone operator. NULL for 0 (none) and ReLU
 * (inlined where it is applied). */
typedef void (*RowActivation)(const float *in, float *out, ptrdiff_t count, float alpha);
RowActivation native_row_activation(int code);

/* The vector ISA in use ("avx512", "avx2" or "baseline"): the GEMM's, which the other
 * per-ISA kernels (the convolution's tap sums) follow, so gemm_set_isa switches them all. */
const char *gemm_isa_name(void);

#endif
