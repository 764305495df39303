/* openacl._native's float32 GEMM: C = A @ B (+ C) (+ bias) (then ReLU), packed operands,
 * on the pool of _native_pool.c.
 *
 * Why: a model's weights are constants. Packed once into the layout the microkernel reads
 * (as BLIS and onnxruntime's MLAS pack them), every later product skips that work, and the
 * bias, the activation and a residual add are applied to each tile while it is in cache
 * instead of in more passes over the output. Running on openacl's own pool keeps a model's
 * products and its other kernels on one set of threads.
 *
 * Layout (BLIS's): K is cut into blocks of at most `kc` (the ISA's). A (M x K) packs into
 * panels of MR rows: within a K block starting at k0, panel i holds its MR rows' values
 * column by column (kc_b x MR floats), rows past M zero; B (K x N) packs into panels of NR
 * columns the same way, row by row (kc_b x NR floats), columns past N zero. Block k0 starts
 * at k0 * M_padded (A) or k0 * N_padded (B). A packed matrix is valid for the ISA that
 * packed it (NR and kc are part of its description, checked at every use).
 *
 * Invariants: the microkernels read whole panels and write whole MR x NR tiles; partial
 * tiles at the edges go through a local tile, so nothing is read or written outside the
 * packed buffers and the output's rows x columns. A raw B is packed by each task, block by
 * block, into its thread's scratch (kept between calls, freed when the thread ends). Raw operands are read through their
 * exporter's strides (numpy's views are valid for every index in their shape). Work is cut
 * into tasks of whole tiles that write disjoint parts of C. An im2col operand (conv2d_gemm)
 * is packed like a raw B, from the image, every read inside the image by construction.
 * The output must not overlap the operands or the bias (the Python wrapper checks).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_native_gemm.h"
#include "_native_pool.h"

#define MR 6
#define NR_MAX 32
#define RAW_COLUMNS_MAX 256 /* a raw B is packed this many columns at a time */
#define ROW_BLOCK (MR * 16) /* rows of A per pass over a B panel: their panels stay in L2 */
#define SERIAL_WORK 131072.0 /* fewer multiply-adds run on the caller alone: waking a
                             * sleeping worker costs more (40-60 us on a VM) */

/* a[r][p] is rows[r][p * k_step]: a packed panel (rows[r] = panel + r, k_step MR) or the
 * rows of a raw A with contiguous rows (k_step 1), read in place. `mode`: TILE_ACCUMULATE
 * (add to C), then TILE_ROW_BIAS (bias[r] per row) or TILE_COLUMN_BIAS (bias[0:NR) per
 * column: whole tiles only), then TILE_RELU, in registers before the one store, in the
 * epilogue's order: ((C + sum) + bias) then ReLU. (An epilogue pass reading the tile back
 * waits for its stores' cache misses: measured, as long as a K = 16 product.) */
typedef void (*MicroKernel)(ptrdiff_t kc, const float *const *rows, ptrdiff_t k_step,
                            const float *b, float *c, ptrdiff_t ldc, int mode,
                            const float *bias);
#define TILE_ACCUMULATE 1
#define TILE_ROW_BIAS 2
#define TILE_COLUMN_BIAS 4
#define TILE_RELU 8

/* x = max(x, 0) on a vector, NaN staying NaN (x < 0 is false for it) and -0 staying -0, as
 * row_relu's scalar `x < 0 ? 0 : x` (_native.c) */
#define VECTOR_RELU(x, V)                                                                   \
    {                                                                                       \
        __typeof__((x) < (V){0}) negative = (x) < (V){0};                                  \
        (x) = (V)((__typeof__(negative))(x) & ~negative);                                  \
    }

/* the tile's finished row r: h = 0, 1 its two vectors */
#define FINISH_VECTOR(sum, V, W, row, h, r)                                                 \
    {                                                                                       \
        if (mode & TILE_ACCUMULATE)                                                         \
            sum += *(const V *)((row) + (h) * W);                                           \
        if (mode & TILE_ROW_BIAS)                                                           \
            sum += bias[r];                                                                 \
        else if (mode & TILE_COLUMN_BIAS)                                                   \
            sum += *(const V *)(bias + (h) * W);                                            \
        if (mode & TILE_RELU)                                                               \
            VECTOR_RELU(sum, V)                                                             \
        *(V *)((row) + (h) * W) = sum;                                                      \
    }

/* One microkernel per vector width, from one body: 2 vectors of W floats per row, MR rows,
 * 2 * MR accumulators (GCC vector extensions; a scalar operand is broadcast). */
#define KERNEL_ROW(r, V, W)                                                                 \
    {                                                                                       \
        float *row = c + (r) * ldc;                                                         \
        FINISH_VECTOR(acc##r##0, V, W, row, 0, r)                                           \
        FINISH_VECTOR(acc##r##1, V, W, row, 1, r)                                           \
    }

#define KERNEL_STEP(r)                                                                      \
    {                                                                                       \
        float value = a##r[offset];                                                         \
        acc##r##0 += value * b0;                                                            \
        acc##r##1 += value * b1;                                                            \
    }

#define DEFINE_KERNEL(NAME, TARGET, V, W)                                                   \
    TARGET static void NAME(ptrdiff_t kc, const float *const *rows, ptrdiff_t k_step,      \
                            const float *restrict b, float *restrict c, ptrdiff_t ldc,      \
                            int mode, const float *restrict bias) {                        \
        const float *a0 = rows[0], *a1 = rows[1], *a2 = rows[2];                            \
        const float *a3 = rows[3], *a4 = rows[4], *a5 = rows[5];                            \
        V acc00 = {0}, acc01 = {0}, acc10 = {0}, acc11 = {0}, acc20 = {0}, acc21 = {0};    \
        V acc30 = {0}, acc31 = {0}, acc40 = {0}, acc41 = {0}, acc50 = {0}, acc51 = {0};    \
        for (ptrdiff_t p = 0, offset = 0; p < kc; p++, offset += k_step) {                  \
            V b0 = *(const V *)b, b1 = *(const V *)(b + W);                                 \
            KERNEL_STEP(0) KERNEL_STEP(1) KERNEL_STEP(2)                                    \
            KERNEL_STEP(3) KERNEL_STEP(4) KERNEL_STEP(5)                                    \
            b += 2 * W;                                                                     \
        }                                                                                   \
        KERNEL_ROW(0, V, W) KERNEL_ROW(1, V, W) KERNEL_ROW(2, V, W)                          \
        KERNEL_ROW(3, V, W) KERNEL_ROW(4, V, W) KERNEL_ROW(5, V, W)                          \
    }

/* The microkernel of a tile of R < MR rows (a matrix-vector product, a decoder's few
 * tokens): the full kernel would compute MR rows and drop the rest. With so few rows the
 * chains of dependent multiply-adds are too few to hide their latency, so each row keeps U
 * partial sums (k = p mod U), added pairwise at the end. R and U are constants where this
 * is inlined, so the loops unroll and the accumulators live in registers. */
#define DEFINE_FEW_BODY(V, W)                                                               \
    static inline __attribute__((always_inline)) void few_##V(                             \
        ptrdiff_t kc, const float *const *rows, ptrdiff_t k_step, const float *restrict b,  \
        float *restrict c, ptrdiff_t ldc, int mode, const float *restrict bias, const int R, \
        const int U) {                                                                      \
        const float *a[MR];                                                                 \
        V acc[MR][4][2];                                                                    \
        for (int r = 0; r < R; r++) {                                                       \
            a[r] = rows[r];                                                                 \
            for (int u = 0; u < U; u++)                                                     \
                acc[r][u][0] = acc[r][u][1] = (V){0};                                       \
        }                                                                                   \
        ptrdiff_t p = 0;                                                                    \
        for (; p + U <= kc; p += U)                                                         \
            for (int u = 0; u < U; u++) {                                                   \
                const float *panel = b + (p + u) * 2 * W;                                   \
                V b0 = *(const V *)panel, b1 = *(const V *)(panel + W);                     \
                for (int r = 0; r < R; r++) {                                               \
                    float value = a[r][(p + u) * k_step];                                   \
                    acc[r][u][0] += value * b0;                                             \
                    acc[r][u][1] += value * b1;                                             \
                }                                                                           \
            }                                                                               \
        for (; p < kc; p++) {                                                               \
            const float *panel = b + p * 2 * W;                                             \
            V b0 = *(const V *)panel, b1 = *(const V *)(panel + W);                         \
            for (int r = 0; r < R; r++) {                                                   \
                float value = a[r][p * k_step];                                             \
                acc[r][0][0] += value * b0;                                                 \
                acc[r][0][1] += value * b1;                                                 \
            }                                                                               \
        }                                                                                   \
        for (int r = 0; r < R; r++) {                                                       \
            float *row = c + r * ldc;                                                       \
            for (int h = 0; h < 2; h++) {                                                   \
                V sum = acc[r][0][h];                                                       \
                if (U == 2)                                                                 \
                    sum += acc[r][1][h];                                                    \
                if (U == 4)                                                                 \
                    sum = (sum + acc[r][1][h]) + (acc[r][2][h] + acc[r][3][h]);             \
                FINISH_VECTOR(sum, V, W, row, h, r)                                         \
            }                                                                               \
        }                                                                                   \
    }

#define FEW_KERNEL(NAME, TARGET, V, R, U)                                                   \
    TARGET static void NAME(ptrdiff_t kc, const float *const *rows, ptrdiff_t k_step,      \
                            const float *restrict b, float *restrict c, ptrdiff_t ldc,      \
                            int mode, const float *restrict bias) {                        \
        few_##V(kc, rows, k_step, b, c, ldc, mode, bias, R, U);                             \
    }

/* the kernels of 1 to MR - 1 rows, by row count (index 0 unused) */
#define DEFINE_FEW_KERNELS(PREFIX, TARGET, V)                                               \
    FEW_KERNEL(PREFIX##_1, TARGET, V, 1, 4)                                                 \
    FEW_KERNEL(PREFIX##_2, TARGET, V, 2, 2)                                                 \
    FEW_KERNEL(PREFIX##_3, TARGET, V, 3, 1)                                                 \
    FEW_KERNEL(PREFIX##_4, TARGET, V, 4, 1)                                                 \
    FEW_KERNEL(PREFIX##_5, TARGET, V, 5, 1)
#define FEW_TABLE(PREFIX) {NULL, PREFIX##_1, PREFIX##_2, PREFIX##_3, PREFIX##_4, PREFIX##_5}

/* unaligned vector types (aligned(4)): packed buffers and output rows need no alignment */
typedef float v4sf __attribute__((vector_size(16), aligned(4)));
DEFINE_KERNEL(kernel_4, , v4sf, 4)
DEFINE_FEW_BODY(v4sf, 4)
DEFINE_FEW_KERNELS(few_4, , v4sf)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define X86_GEMM 1
typedef float v8sf __attribute__((vector_size(32), aligned(4)));
typedef float v16sf __attribute__((vector_size(64), aligned(4)));
DEFINE_KERNEL(kernel_8, __attribute__((target("avx2,fma"))), v8sf, 8)
DEFINE_KERNEL(kernel_16, __attribute__((target("avx512f"))), v16sf, 16)
DEFINE_FEW_BODY(v8sf, 8)
DEFINE_FEW_BODY(v16sf, 16)
DEFINE_FEW_KERNELS(few_8, __attribute__((target("avx2,fma"))), v8sf)
DEFINE_FEW_KERNELS(few_16, __attribute__((target("avx512f"))), v16sf)
#endif

typedef struct {
    const char *name;
    int nr;       /* columns of a B panel: 2 vectors */
    ptrdiff_t kc; /* the longest K block: a B panel (kc x nr) stays in L1 */
    MicroKernel kernel;
    MicroKernel few[MR]; /* few[r]: a tile of r < MR rows */
} Isa;

static const Isa ISAS[] = {
#ifdef X86_GEMM
    {"avx512", 32, 192, kernel_16, FEW_TABLE(few_16)},
    {"avx2", 16, 384, kernel_8, FEW_TABLE(few_8)},
#endif
    {"baseline", 8, 512, kernel_4, FEW_TABLE(few_4)},
};
#define ISA_COUNT ((int)(sizeof ISAS / sizeof ISAS[0]))

static const Isa *isa_in_use;

static int isa_supported(const Isa *isa) {
#ifdef X86_GEMM
    if (strcmp(isa->name, "avx512") == 0)
        return __builtin_cpu_supports("avx512f");
    if (strcmp(isa->name, "avx2") == 0)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return 1;
}

static const Isa *current_isa(void) {
    if (isa_in_use == NULL)
        for (int i = 0; i < ISA_COUNT; i++)
            if (isa_supported(&ISAS[i])) {
                isa_in_use = &ISAS[i];
                break;
            }
    return isa_in_use;
}

const char *gemm_isa_name(void) {
    return current_isa()->name;
}

static ptrdiff_t round_up(ptrdiff_t value, ptrdiff_t step) {
    return (value + step - 1) / step * step;
}

/* -- operands ------------------------------------------------------------------------------ */
/* A convolution's im2col matrix, never stored: row k = (c * KH + i) * KW + j, column
 * l = oh * OW + ow holds x[c, oh * SH + i * DH - PH, ow * SW + j * DW - PW], 0 outside the
 * image (one image: C x H x W floats, contiguous). */
typedef struct {
    ptrdiff_t channels, height, width, kernel_h, kernel_w, stride_h, stride_w;
    ptrdiff_t pad_h, pad_w, dilation_h, dilation_w, out_h, out_w;
} Im2colShape;

/* A matrix as the GEMM reads it: raw (strided, in elements), packed, or an image's im2col
 * matrix (B only: packed straight from the image, block by block, as a raw B is). */
typedef struct {
    const float *data;
    ptrdiff_t rows, cols;
    ptrdiff_t row_stride, col_stride; /* raw */
    int packed;
    ptrdiff_t batch_stride; /* raw, batched: elements from one matrix to the next (0: one
                             * matrix for every product of the batch) */
    const Im2colShape *im2col; /* non-NULL: data is an image of this shape */
    const ptrdiff_t *row_offsets; /* raw B only, non-NULL: row k starts at data +
                                   * row_offsets[k] (its columns contiguous) */
} Operand;

/* Pack A's rows panel * MR ... + MR of the K block at k0 (`block` deep) into dst (block x
 * MR floats, column by column; rows past A's zero). (B packs by pack_columns.) */
static void pack_rows(const Operand *m, ptrdiff_t block, ptrdiff_t k0, ptrdiff_t panel,
                      float *dst) {
    ptrdiff_t first = panel * MR;
    ptrdiff_t valid = m->rows - first < MR ? m->rows - first : MR;
    const float *src = m->data + first * m->row_stride + k0 * m->col_stride;
    for (ptrdiff_t p = 0; p < block; p++, dst += MR) {
        const float *column = src + p * m->col_stride;
        for (ptrdiff_t q = 0; q < valid; q++)
            dst[q] = column[q * m->row_stride];
        for (ptrdiff_t q = valid; q < MR; q++)
            dst[q] = 0.0f;
    }
}

/* Where packing writes next: lane `lane` of `panel`, the panels `step` floats apart;
 * `width` (the ISA's NR) is a constant where these are inlined (pack_im2col_width), so a
 * whole panel's row is a fixed-size copy. */
typedef struct {
    float *panel;
    ptrdiff_t lane, step;
} PanelCursor;

static inline __attribute__((always_inline)) void put_zeros(PanelCursor *at, ptrdiff_t count,
                                                            const int width) {
    while (count > 0) {
        ptrdiff_t n = width - at->lane < count ? width - at->lane : count;
        for (ptrdiff_t q = 0; q < n; q++)
            at->panel[at->lane + q] = 0.0f;
        count -= n;
        if ((at->lane += n) == width) {
            at->lane = 0;
            at->panel += at->step;
        }
    }
}

static inline __attribute__((always_inline)) void put_values(PanelCursor *at,
                                                             const float *source,
                                                             ptrdiff_t step, ptrdiff_t count,
                                                             const int width) {
    while (count > 0) {
        ptrdiff_t n = width - at->lane < count ? width - at->lane : count;
        float *out = at->panel + at->lane;
        if (n == width && step == 1)
            memcpy(out, source, (size_t)width * sizeof(float)); /* a fixed size: inlined */
        else if (step == 1) /* a panel's part (a run across panels): a contiguous loop */
            for (ptrdiff_t q = 0; q < n; q++)
                out[q] = source[q];
        else
            for (ptrdiff_t q = 0; q < n; q++)
                out[q] = source[q * step];
        source += n * step;
        count -= n;
        if ((at->lane += n) == width) {
            at->lane = 0;
            at->panel += at->step;
        }
    }
}

/* pack_columns for an im2col operand: each K row's columns are runs along output rows,
 * each run a zero margin, a strided (stride 1: contiguous) copy of one input row, a zero
 * margin; every read is inside the image by construction. */
static inline __attribute__((always_inline)) void pack_im2col_width(
    const Operand *m, ptrdiff_t block, ptrdiff_t k0, ptrdiff_t col0, ptrdiff_t col1,
    float *dst, const int nr) {
    const Im2colShape *s = m->im2col;
    ptrdiff_t taps = s->kernel_h * s->kernel_w, tail = round_up(col1 - col0, nr) - (col1 - col0);
    for (ptrdiff_t p = 0; p < block; p++) {
        ptrdiff_t k = k0 + p, c = k / taps, i = k % taps / s->kernel_w, j = k % s->kernel_w;
        const float *plane = m->data + c * s->height * s->width;
        PanelCursor at = {dst + p * nr, 0, nr * block};
        ptrdiff_t oh = col0 / s->out_w, ow = col0 % s->out_w;
        for (ptrdiff_t l = col0; l < col1; oh++, ow = 0) {
            ptrdiff_t run = s->out_w - ow < col1 - l ? s->out_w - ow : col1 - l;
            ptrdiff_t ih = oh * s->stride_h + i * s->dilation_h - s->pad_h;
            l += run;
            if (ih < 0 || ih >= s->height) {
                put_zeros(&at, run, nr);
                continue;
            }
            /* outputs [lo, hi) of the run read inside the row: 0 <= iw0 + r * SW < W */
            ptrdiff_t iw0 = ow * s->stride_w + j * s->dilation_w - s->pad_w;
            ptrdiff_t lo = iw0 >= 0 ? 0 : (-iw0 + s->stride_w - 1) / s->stride_w;
            ptrdiff_t hi = s->width > iw0 ? (s->width - iw0 + s->stride_w - 1) / s->stride_w : 0;
            hi = hi < run ? hi : run;
            lo = lo < hi ? lo : hi;
            put_zeros(&at, lo, nr);
            put_values(&at, plane + ih * s->width + iw0 + lo * s->stride_w, s->stride_w,
                       hi - lo, nr);
            put_zeros(&at, run - hi, nr);
        }
        put_zeros(&at, tail, nr);
    }
}

/* (compiled for AVX-512 and AVX2 too: the runs' copies become full-width vector moves) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
static void pack_im2col(const Operand *m, int nr, ptrdiff_t block, ptrdiff_t k0,
                        ptrdiff_t col0, ptrdiff_t col1, float *dst) {
    switch (nr) { /* each ISA's NR */
    case 8:
        pack_im2col_width(m, block, k0, col0, col1, dst, 8);
        break;
    case 16:
        pack_im2col_width(m, block, k0, col0, col1, dst, 16);
        break;
    default:
        pack_im2col_width(m, block, k0, col0, col1, dst, 32);
    }
}

/* Pack B's columns [col0, col1) of the K block at k0 into panels (dst: the first panel),
 * row by row: the reads stream along B's rows (packing panel by panel would read one
 * cache line per row, a page apart, each a miss the prefetcher does not see coming). */
static void pack_columns(const Operand *m, int nr, ptrdiff_t block, ptrdiff_t k0,
                         ptrdiff_t col0, ptrdiff_t col1, float *dst) {
    if (m->im2col != NULL) {
        pack_im2col(m, nr, block, k0, col0, col1, dst);
        return;
    }
    if (m->row_stride == 1 && m->col_stride != 1) { /* a transposed B (K^T of attention):
                                                     * each column is contiguous */
        for (ptrdiff_t j = col0; j < col1; j += nr, dst += nr * block) {
            ptrdiff_t valid = col1 - j < nr ? col1 - j : nr;
            for (ptrdiff_t q = 0; q < nr; q++) {
                if (q >= valid) {
                    for (ptrdiff_t p = 0; p < block; p++)
                        dst[p * nr + q] = 0.0f;
                    continue;
                }
                const float *column = m->data + (j + q) * m->col_stride + k0;
                for (ptrdiff_t p = 0; p < block; p++)
                    dst[p * nr + q] = column[p];
            }
        }
        return;
    }
    for (ptrdiff_t p = 0; p < block; p++) {
        const float *line = m->data + (m->row_offsets != NULL ? m->row_offsets[k0 + p]
                                                              : (k0 + p) * m->row_stride);
        float *out = dst + p * nr;
        for (ptrdiff_t j = col0; j < col1; j += nr, out += nr * block) {
            ptrdiff_t valid = col1 - j < nr ? col1 - j : nr;
            if (m->col_stride == 1 && valid == nr) {
                for (int q = 0; q < nr; q++)
                    out[q] = line[j + q];
                continue;
            }
            for (ptrdiff_t q = 0; q < valid; q++)
                out[q] = line[(j + q) * m->col_stride];
            for (ptrdiff_t q = valid; q < nr; q++)
                out[q] = 0.0f;
        }
    }
}

typedef struct {
    const Operand *matrix;
    int side, width;
    ptrdiff_t padded, kc, depth, panels, per_task;
    float *out;
} PackJob;

static void pack_task(void *context, ptrdiff_t task) {
    const PackJob *job = context;
    const Operand *m = job->matrix;
    ptrdiff_t first = task * job->per_task;
    ptrdiff_t last = first + job->per_task < job->panels ? first + job->per_task : job->panels;
    for (ptrdiff_t k0 = 0; k0 < job->depth; k0 += job->kc) {
        ptrdiff_t block = job->depth - k0 < job->kc ? job->depth - k0 : job->kc;
        float *block_out = job->out + k0 * job->padded + first * job->width * block;
        if (job->side == GEMM_RIGHT) {
            ptrdiff_t end = last * job->width < m->cols ? last * job->width : m->cols;
            pack_columns(m, job->width, block, k0, first * job->width, end, block_out);
            continue;
        }
        for (ptrdiff_t panel = first; panel < last; panel++, block_out += MR * block)
            pack_rows(m, block, k0, panel, block_out);
    }
}

/* The float32 count of a packed rows x cols matrix for `side`, for the kernel in use. */
static ptrdiff_t gemm_packed_size(ptrdiff_t rows, ptrdiff_t cols, int side) {
    const Isa *isa = current_isa();
    return side == GEMM_LEFT ? round_up(rows, MR) * cols : rows * round_up(cols, isa->nr);
}

/* Packs a raw matrix into `out` (gemm_packed_size floats), on the pool. */
static void pack_matrix(const Operand *m, int side, float *out) {
    const Isa *isa = current_isa();
    int width = side == GEMM_LEFT ? MR : isa->nr;
    ptrdiff_t extent = side == GEMM_LEFT ? m->rows : m->cols;
    ptrdiff_t depth = side == GEMM_LEFT ? m->cols : m->rows;
    ptrdiff_t panels = round_up(extent, width) / width;
    ptrdiff_t tasks = pool_threads() * 4; /* small matrices: one task, no pool round trip */
    if (panels * depth * width < 16384)
        tasks = 1;
    else if (tasks > panels)
        tasks = panels;
    PackJob job = {m, side, width, panels * width, isa->kc, depth, panels,
                   (panels + tasks - 1) / tasks, out};
    pool_run((panels + job.per_task - 1) / job.per_task, pack_task, &job);
}

/* -- the product ---------------------------------------------------------------------------- */
typedef struct {
    const Isa *isa;
    const float *a, *b; /* b packed; a packed, or raw with contiguous rows (a_stride) */
    ptrdiff_t a_stride; /* 0: a is packed */
    const Operand *b_raw; /* b unpacked: each task packs a panel just before its use */
    float *c;
    ptrdiff_t m, n, k, ldc, m_padded, n_padded;
    ptrdiff_t batch, a_batch_stride, c_batch_stride; /* the products of a batch */
    const float *bias;
    int flags;
    RowActivation activation; /* the flags' activation, or NULL (ReLU: in the tiles) */
    float alpha;              /* its parameter */
    ptrdiff_t row_tile, col_tile, col_tasks, row_tasks;
    atomic_int failed; /* a task could not get its scratch */
} ProductJob;

/* The bias and the activation of C's rows [row, row + rows) x [col, col + cols) (an empty
 * product's; the tiles' bias and ReLU are applied by the microkernels). */
static void epilogue(const ProductJob *g, float *c, ptrdiff_t row, ptrdiff_t col,
                     ptrdiff_t rows, ptrdiff_t cols) {
    int bias_rows = g->flags & GEMM_BIAS_ROWS;
    if (g->bias == NULL && g->activation == NULL)
        return;
    for (ptrdiff_t r = 0; r < rows; r++) {
        float *line = c + (row + r) * g->ldc + col;
        if (g->bias != NULL) {
            if (bias_rows) {
                float value = g->bias[row + r];
                for (ptrdiff_t q = 0; q < cols; q++)
                    line[q] += value;
            } else {
                const float *bias = g->bias + col;
                for (ptrdiff_t q = 0; q < cols; q++)
                    line[q] += bias[q];
            }
        }
        if (g->activation != NULL)
            g->activation(line, line, cols, g->alpha);
    }
}

static void product_task(void *context, ptrdiff_t task) {
    ProductJob *job = context;
    ptrdiff_t tiles = job->row_tasks * job->col_tasks;
    ptrdiff_t item = task / tiles;
    task %= tiles;
    ProductJob one = *job; /* this task's product of the batch */
    Operand b_item;
    one.a += item * job->a_batch_stride;
    one.c += item * job->c_batch_stride;
    if (job->b_raw != NULL) {
        b_item = *job->b_raw;
        b_item.data += item * b_item.batch_stride;
        one.b_raw = &b_item;
    }
    const ProductJob *g = &one;
    const Isa *isa = g->isa;
    int nr = isa->nr;
    ptrdiff_t row0 = task / g->col_tasks * g->row_tile;
    ptrdiff_t col0 = task % g->col_tasks * g->col_tile;
    ptrdiff_t row1 = row0 + g->row_tile < g->m ? row0 + g->row_tile : g->m;
    ptrdiff_t col1 = col0 + g->col_tile < g->n ? col0 + g->col_tile : g->n;
    int accumulate = g->flags & GEMM_ACCUMULATE;
    int bias_rows = g->flags & GEMM_BIAS_ROWS;
    int relu = (g->flags & GEMM_ACTIVATION_MASK) == GEMM_RELU;
    float tile[MR * NR_MAX], tile_bias[NR_MAX];
    float *packed_b = NULL; /* a raw B's block of this task's columns, packed here */
    if (g->b_raw != NULL) {
        packed_b = pool_scratch(round_up(col1 - col0, nr) * isa->kc);
        if (packed_b == NULL) {
            atomic_store(&job->failed, 1);
            return;
        }
    }
    if (g->k == 0) {
        for (ptrdiff_t r = row0; r < row1 && !accumulate; r++)
            memset(g->c + r * g->ldc + col0, 0, (size_t)(col1 - col0) * sizeof(float));
        epilogue(g, g->c, row0, col0, row1 - row0, col1 - col0);
        return;
    }
    for (ptrdiff_t k0 = 0; k0 < g->k; k0 += isa->kc) {
        ptrdiff_t block = g->k - k0 < isa->kc ? g->k - k0 : isa->kc;
        int add = accumulate || k0 > 0;
        int last = k0 + block == g->k;
        const float *a_block = g->a + k0 * g->m_padded;
        const float *b_block = g->b == NULL ? NULL : g->b + k0 * g->n_padded;
        if (g->b_raw != NULL)
            pack_columns(g->b_raw, nr, block, k0, col0, col1, packed_b);
        /* rows in blocks of ROW_BLOCK (their A panels stay in L2) for each B panel (in L1);
         * a raw B's task holds every row, so its columns are packed once */
        for (ptrdiff_t first_row = row0; first_row < row1; first_row += ROW_BLOCK)
        for (ptrdiff_t j = col0; j < col1; j += nr) {
            const float *b_panel = g->b_raw == NULL
                                       ? b_block + j * block /* (j / nr) * nr * block */
                                       : packed_b + (j - col0) * block;
            ptrdiff_t cols = col1 - j < nr ? col1 - j : nr;
            ptrdiff_t last_row = first_row + ROW_BLOCK < row1 ? first_row + ROW_BLOCK : row1;
            for (ptrdiff_t i = first_row; i < last_row; i += MR) {
                ptrdiff_t rows = row1 - i < MR ? row1 - i : MR;
                const float *a_rows[MR];
                ptrdiff_t k_step;
                if (g->a_stride == 0) { /* packed: the panel's rows are interleaved */
                    const float *a_panel = a_block + i * block;
                    for (int r = 0; r < MR; r++)
                        a_rows[r] = a_panel + r;
                    k_step = MR;
                } else { /* raw: rows past M repeat the last one (their results are dropped) */
                    for (int r = 0; r < MR; r++)
                        a_rows[r] = g->a + (i + (r < rows ? r : rows - 1)) * g->a_stride + k0;
                    k_step = 1;
                }
                float *c = g->c + i * g->ldc + j;
                MicroKernel kernel = rows == MR ? isa->kernel : isa->few[rows];
                int mode = add ? TILE_ACCUMULATE : 0;
                const float *bias = NULL;
                if (last && g->bias != NULL) {
                    if (bias_rows) {
                        mode |= TILE_ROW_BIAS;
                        bias = g->bias + i;
                    } else {
                        mode |= TILE_COLUMN_BIAS;
                        bias = g->bias + j;
                        if (cols < nr) { /* the kernel reads nr values */
                            memcpy(tile_bias, bias, (size_t)cols * sizeof(float));
                            memset(tile_bias + cols, 0, (size_t)(nr - cols) * sizeof(float));
                            bias = tile_bias;
                        }
                    }
                }
                if (last && relu)
                    mode |= TILE_RELU;
                if (cols == nr) { /* (a few-row kernel writes its rows only) */
                    kernel(block, a_rows, k_step, b_panel, c, g->ldc, mode, bias);
                } else {
                    if (add)
                        for (ptrdiff_t r = 0; r < rows; r++)
                            memcpy(tile + r * nr, c + r * g->ldc, (size_t)cols * sizeof(float));
                    kernel(block, a_rows, k_step, b_panel, tile, nr, mode, bias);
                    for (ptrdiff_t r = 0; r < rows; r++)
                        memcpy(c + r * g->ldc, tile + r * nr, (size_t)cols * sizeof(float));
                }
            }
            /* another activation over the block's finished rows, once their stores have
             * landed (reading a tile straight back waits for its cache misses) */
            if (last && g->activation != NULL && !relu && j + nr >= col1)
                for (ptrdiff_t r = first_row; r < last_row; r++)
                    g->activation(g->c + r * g->ldc + col0, g->c + r * g->ldc + col0,
                                  col1 - col0, g->alpha);
        }
    }
}

/* Cuts C into tiles of whole microkernel tiles: rows in blocks whose packed A stays in L2,
 * columns split until there are a few tasks per thread (or the product is small). */
static void plan_tiles(ProductJob *g) {
    int threads = pool_threads();
    int nr = g->isa->nr;
    ptrdiff_t row_panels = g->m_padded / MR, col_panels = g->n_padded / nr;
    /* a packed B: tasks of ROW_BLOCK rows; a raw B: tasks of every row (each task packs its
     * columns, and a second row task would pack them again) */
    g->row_tile = g->b_raw != NULL ? g->m_padded : ROW_BLOCK < g->m_padded ? ROW_BLOCK
                                                                            : g->m_padded;
    ptrdiff_t row_tasks = (row_panels * MR + g->row_tile - 1) / g->row_tile * g->batch;
    double work = (double)g->m * (double)g->n * (double)(g->k > 0 ? g->k : 1) *
                  (double)g->batch;
    ptrdiff_t col_tasks = 1;
    if (threads > 1 && work >= SERIAL_WORK) {
        ptrdiff_t wanted = 4 * threads;
        col_tasks = (wanted + row_tasks - 1) / row_tasks;
    }
    if (col_tasks > col_panels)
        col_tasks = col_panels;
    ptrdiff_t panels_per_task = (col_panels + col_tasks - 1) / col_tasks;
    if (g->b_raw != NULL && panels_per_task * nr > RAW_COLUMNS_MAX) /* its block in L2 */
        panels_per_task = RAW_COLUMNS_MAX / nr;
    g->col_tile = panels_per_task * nr;
    g->col_tasks = (col_panels + panels_per_task - 1) / panels_per_task;
    if (threads <= 1 || work < SERIAL_WORK) { /* one task: no pool round trip */
        g->row_tile = g->m_padded;
        if (g->b_raw == NULL) {
            g->col_tile = g->n_padded;
            g->col_tasks = 1;
        }
    }
    g->row_tasks = (g->m + g->row_tile - 1) / g->row_tile;
}

/* C = A @ B per `flags` for each of `batch` products (C's matrices c_batch_stride apart,
 * the operands' by their batch_stride; a packed operand serves them all); `a` and `b` raw
 * or packed. Returns 0, or -1 when scratch cannot be allocated. Call without the GIL. */
static int gemm_run(const Operand *a, const Operand *b, float *c, ptrdiff_t ldc,
                    const float *bias, int flags, float alpha, ptrdiff_t batch,
                    ptrdiff_t c_batch_stride) {
    const Isa *isa = current_isa();
    ProductJob g = {.isa = isa, .c = c, .m = a->rows, .n = b->cols, .k = a->cols, .ldc = ldc,
                    .m_padded = round_up(a->rows, MR), .n_padded = round_up(b->cols, isa->nr),
                    .batch = batch, .c_batch_stride = c_batch_stride, .bias = bias,
                    .flags = flags,
                    .activation = native_row_activation(flags & GEMM_ACTIVATION_MASK),
                    .alpha = alpha};
    if (g.m == 0 || g.n == 0 || batch == 0)
        return 0;
    float *scratch_a = NULL;
    /* A with contiguous rows is read in place (as MLAS does): packing it costs more than
     * the strided broadcasts it saves */
    int a_in_place = !a->packed && (a->col_stride == 1 || a->cols <= 1);
    if (a_in_place) {
        g.a_stride = a->row_stride > 0 ? a->row_stride : 1;
        g.a_batch_stride = a->batch_stride;
    }
    if (g.k > 0 && !a->packed && !a_in_place) {
        ptrdiff_t size = gemm_packed_size(a->rows, a->cols, GEMM_LEFT);
        ptrdiff_t copies = a->batch_stride == 0 ? 1 : batch;
        scratch_a = malloc((size_t)(size * copies) * sizeof(float));
        if (scratch_a == NULL)
            return -1;
        for (ptrdiff_t item = 0; item < copies; item++) {
            Operand one = *a;
            one.data += item * a->batch_stride;
            pack_matrix(&one, GEMM_LEFT, scratch_a + item * size);
        }
        g.a_batch_stride = copies == 1 ? 0 : size;
    }
    g.a = a->packed || a_in_place ? a->data : scratch_a;
    if (b->packed)
        g.b = b->data;
    else
        g.b_raw = b;
    plan_tiles(&g);
    atomic_init(&g.failed, 0);
    pool_run(batch * g.row_tasks * g.col_tasks, product_task, &g);
    free(scratch_a);
    return atomic_load(&g.failed) ? -1 : 0;
}

/* -- Python ------------------------------------------------------------------------------- */
/* A float32 matrix (2 dims), or with `batched` a batch of them (3 dims: batch first), with
 * non-negative strides that are whole elements. */
static int matrix_buffer(PyObject *object, Py_buffer *view, int writable, int batched,
                         const char *name) {
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) != 0)
        return -1;
    const char *problem = NULL;
    if (view->itemsize != 4 || view->format == NULL || strcmp(view->format, "f") != 0)
        problem = "must be a float32 buffer";
    else if (view->ndim != 2 && !(batched && view->ndim == 3))
        problem = batched ? "must have 2 or 3 dims" : "must have 2 dims";
    for (int d = 0; problem == NULL && d < view->ndim; d++)
        if (view->strides[d] < 0 || view->strides[d] % 4 != 0)
            problem = "must have non-negative strides of whole float32 elements";
    if (problem != NULL) {
        PyErr_Format(PyExc_TypeError, "argument '%s' %s", name, problem);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* An operand: a float32 matrix or batch of matrices (its batch size into *batch, 0 for a
 * matrix), or a packed matrix (data, rows, cols, side, nr, kc). */
static int get_operand(PyObject *object, int side, const char *name, Py_buffer *view,
                       Operand *operand, Py_ssize_t *batch) {
    memset(operand, 0, sizeof *operand);
    *batch = 0;
    if (!PyTuple_Check(object)) {
        if (matrix_buffer(object, view, 0, 1, name) != 0)
            return -1;
        int first = view->ndim - 2;
        *operand = (Operand){view->buf, view->shape[first], view->shape[first + 1],
                             view->strides[first] / 4, view->strides[first + 1] / 4, 0,
                             first ? view->strides[0] / 4 : 0};
        if (first)
            *batch = view->shape[0];
        return 0;
    }
    PyObject *data;
    Py_ssize_t rows, cols, nr, kc;
    int packed_side;
    if (!PyArg_ParseTuple(object, "Onninn", &data, &rows, &cols, &packed_side, &nr, &kc)) {
        PyErr_Format(PyExc_TypeError, "argument '%s': a packed matrix is (data, rows, cols, "
                     "side, nr, kc)", name);
        return -1;
    }
    const Isa *isa = current_isa();
    if (packed_side != side || nr != isa->nr || kc != isa->kc || rows < 0 || cols < 0) {
        PyErr_Format(PyExc_ValueError, "argument '%s' was packed as side %d with nr %zd, kc "
                     "%zd; this product needs side %d packed for the %s kernel (nr %d, kc %zd)",
                     name, packed_side, nr, kc, side, isa->name, isa->nr, isa->kc);
        return -1;
    }
    if (PyObject_GetBuffer(data, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
        return -1;
    Py_ssize_t needed = gemm_packed_size(rows, cols, side);
    if (view->itemsize != 4 || view->format == NULL || strcmp(view->format, "f") != 0 ||
        view->len / 4 != needed) {
        PyErr_Format(PyExc_ValueError, "argument '%s': packed data must be %zd float32 values "
                     "for a %zd x %zd matrix", name, needed, rows, cols);
        PyBuffer_Release(view);
        return -1;
    }
    *operand = (Operand){view->buf, rows, cols, 0, 0, 1, 0};
    return 0;
}

static PyObject *py_gemm_pack(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *matrix_object, *out_object;
    int side;
    if (!PyArg_ParseTuple(args, "OiO", &matrix_object, &side, &out_object))
        return NULL;
    if (side != GEMM_LEFT && side != GEMM_RIGHT) {
        PyErr_Format(PyExc_ValueError, "argument 'side' = %d is invalid: 0 (left) or 1 (right)",
                     side);
        return NULL;
    }
    Py_buffer matrix, out;
    if (matrix_buffer(matrix_object, &matrix, 0, 0, "matrix") != 0)
        return NULL;
    if (PyObject_GetBuffer(out_object, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                                                 PyBUF_WRITABLE) != 0) {
        PyBuffer_Release(&matrix);
        return NULL;
    }
    PyObject *result = NULL;
    Operand m = {matrix.buf, matrix.shape[0], matrix.shape[1], matrix.strides[0] / 4,
                 matrix.strides[1] / 4, 0, 0};
    Py_ssize_t needed = gemm_packed_size(m.rows, m.cols, side);
    if (out.itemsize != 4 || out.format == NULL || strcmp(out.format, "f") != 0 ||
        out.len / 4 != needed) {
        PyErr_Format(PyExc_ValueError, "argument 'out' must be %zd float32 values", needed);
    } else {
        Py_BEGIN_ALLOW_THREADS
        if (m.rows > 0 && m.cols > 0)
            pack_matrix(&m, side, out.buf);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&matrix);
    return result;
}

static PyObject *py_gemm_packed_size(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_ssize_t rows, cols;
    int side;
    if (!PyArg_ParseTuple(args, "nni", &rows, &cols, &side))
        return NULL;
    if (rows < 0 || cols < 0 || (side != GEMM_LEFT && side != GEMM_RIGHT) ||
        (cols > 0 && rows > PY_SSIZE_T_MAX / 4 / (cols + NR_MAX))) {
        PyErr_Format(PyExc_ValueError, "no packed layout for %zd x %zd, side %d", rows, cols,
                     side);
        return NULL;
    }
    return PyLong_FromSsize_t(gemm_packed_size(rows, cols, side));
}

static PyObject *py_gemm(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *a_object, *b_object, *out_object, *bias_object;
    int flags;
    if (!PyArg_ParseTuple(args, "OOOOi", &a_object, &b_object, &out_object, &bias_object,
                          &flags))
        return NULL;
    if ((flags & ~(GEMM_ACTIVATION_MASK | GEMM_BIAS_ROWS | GEMM_ACCUMULATE)) != 0 ||
        (flags & GEMM_ACTIVATION_MASK) > GEMM_RELU) {
        PyErr_Format(PyExc_ValueError, "argument 'flags' = %d is invalid", flags);
        return NULL;
    }
    Py_buffer a_view, b_view, out_view, bias_view;
    Operand a, b;
    Py_ssize_t a_batch, b_batch;
    if (get_operand(a_object, GEMM_LEFT, "a", &a_view, &a, &a_batch) != 0)
        return NULL;
    if (get_operand(b_object, GEMM_RIGHT, "b", &b_view, &b, &b_batch) != 0) {
        PyBuffer_Release(&a_view);
        return NULL;
    }
    PyObject *result = NULL;
    int have_out = 0, have_bias = 0;
    if (matrix_buffer(out_object, &out_view, 1, 1, "out") != 0)
        goto done;
    have_out = 1;
    /* a batch: out's first dim; each operand is one matrix for all, or as many */
    int batched = out_view.ndim == 3;
    Py_ssize_t batch = batched ? out_view.shape[0] : 1;
    Py_ssize_t out_batch_stride = batched ? out_view.strides[0] / 4 : 0;
    if ((a_batch && (!batched || a_batch != batch)) || (b_batch && (!batched || b_batch != batch))) {
        PyErr_Format(PyExc_ValueError, "a batch of %zd products (out) cannot take a batch of "
                     "%zd (a) and %zd (b): each operand is one matrix or as many", batch,
                     a_batch, b_batch);
        goto done;
    }
    const Py_ssize_t *out_shape = out_view.shape + (batched ? 1 : 0); /* its matrices' */
    const Py_ssize_t *out_strides = out_view.strides + (batched ? 1 : 0);
    if (bias_object != Py_None) {
        if (PyObject_GetBuffer(bias_object, &bias_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
            goto done;
        have_bias = 1;
    }
    ptrdiff_t m = a.rows, n = b.cols;
    if (a.cols != b.rows) {
        PyErr_Format(PyExc_ValueError, "a is %zd x %zd and b %zd x %zd: the inner sizes differ",
                     a.rows, a.cols, b.rows, b.cols);
        goto done;
    }
    int empty = m == 0 || n == 0 || batch == 0; /* (numpy gives an empty array zero strides) */
    if (out_shape[0] != m || out_shape[1] != n || (!empty && n > 1 && out_strides[1] != 4) ||
        (!empty && m > 1 && out_strides[0] < (Py_ssize_t)(n * 4))) {
        PyErr_Format(PyExc_ValueError, "argument 'out' must be a %zd x %zd float32 matrix with "
                     "contiguous rows", m, n);
        goto done;
    }
    ptrdiff_t bias_length = flags & GEMM_BIAS_ROWS ? m : n;
    if (have_bias && (bias_view.itemsize != 4 || bias_view.format == NULL ||
                      strcmp(bias_view.format, "f") != 0 || bias_view.len / 4 != bias_length)) {
        PyErr_Format(PyExc_ValueError, "argument 'bias' must be %zd float32 values",
                     bias_length);
        goto done;
    }
    if (batched && batch > 1 && !empty &&
        out_batch_stride < (m - 1) * (out_strides[0] / 4) + n) {
        PyErr_SetString(PyExc_ValueError, "argument 'out': its matrices overlap");
        goto done;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = gemm_run(&a, &b, out_view.buf, out_strides[0] / 4,
                      have_bias ? bias_view.buf : NULL, flags, 0.0f, batch, out_batch_stride);
    Py_END_ALLOW_THREADS
    result = failed ? PyErr_NoMemory() : Py_NewRef(Py_None);
done:
    if (have_bias)
        PyBuffer_Release(&bias_view);
    if (have_out)
        PyBuffer_Release(&out_view);
    PyBuffer_Release(&b_view);
    PyBuffer_Release(&a_view);
    return result;
}

/* -- a stride-1 convolution over its padded grid ---------------------------------------
 * With stride 1, im2col's row (c, i, j) at output (oh, ow) reads the padded image at
 * (oh + i * DH, ow + j * DW): on the grid of the padded image's width WP = OW + (KW - 1)
 * * DW, output position g = oh * WP + ow, that row is one contiguous run of the padded
 * image, starting at c * HR * WP + i * DH * WP + j * DW (HR = OH + (KH - 1) * DH rows).
 * So the image is padded once (zeros around it, and KW - 1 floats of slack after, which
 * the last row's run reaches), the product is a raw B with those row offsets (each K row
 * packs by whole-panel copies, where im2col's runs of OW columns cost a few branches and
 * partial copies each), over OH * WP columns, and the WP - OW extra columns of each output
 * row are dropped when the result is compacted into the output (or never made: a kernel
 * one column wide with no column padding has WP = OW and writes the output directly; one
 * that needs no padding at all reads the image in place). The extra columns cost work, so
 * this path is taken only where they are few (GRID_MAX_WASTE). */
#define GRID_MAX_WASTE 8
#ifndef USE_GRID
#define USE_GRID 1
#endif /* extra grid columns at most 1 / GRID_MAX_WASTE of the outputs */

typedef struct {
    const float *from;
    float *to;
    const Im2colShape *s;
    ptrdiff_t rows, wp, c_out, per_task; /* rows: HR */
} GridCopy;

/* the padded image's channels [task * per_task, ...): zeros, then the image's rows */
static void pad_task(void *context, ptrdiff_t task) {
    const GridCopy *g = context;
    const Im2colShape *s = g->s;
    ptrdiff_t first = task * g->per_task;
    ptrdiff_t last = first + g->per_task < s->channels ? first + g->per_task : s->channels;
    for (ptrdiff_t c = first; c < last; c++)
        for (ptrdiff_t r = 0; r < g->rows; r++) {
            float *line = g->to + (c * g->rows + r) * g->wp;
            ptrdiff_t y = r - s->pad_h;
            if (y < 0 || y >= s->height) {
                memset(line, 0, (size_t)g->wp * sizeof(float));
                continue;
            }
            ptrdiff_t right = g->wp - s->pad_w - s->width; /* (>= 0, or the row is cut) */
            ptrdiff_t count = right >= 0 ? s->width : s->width + right;
            memset(line, 0, (size_t)s->pad_w * sizeof(float));
            memcpy(line + s->pad_w, g->from + (c * s->height + y) * s->width,
                   (size_t)count * sizeof(float));
            if (right > 0)
                memset(line + s->pad_w + s->width, 0, (size_t)right * sizeof(float));
        }
}

/* the output channels [task * per_task, ...): each output row from its grid row */
static void compact_task(void *context, ptrdiff_t task) {
    const GridCopy *g = context;
    const Im2colShape *s = g->s;
    ptrdiff_t first = task * g->per_task;
    ptrdiff_t last = first + g->per_task < g->c_out ? first + g->per_task : g->c_out;
    for (ptrdiff_t co = first; co < last; co++)
        for (ptrdiff_t oh = 0; oh < s->out_h; oh++)
            memcpy(g->to + (co * s->out_h + oh) * s->out_w,
                   g->from + (co * s->out_h + oh) * g->wp, (size_t)s->out_w * sizeof(float));
}

/* tasks of whole channels, a few per thread, for `count` channels of `floats` each */
static ptrdiff_t channels_per_task(ptrdiff_t count, ptrdiff_t floats) {
    int threads = pool_threads();
    if (threads <= 1 || (double)count * (double)floats < 32768.0)
        return count;
    ptrdiff_t tasks = 2 * (ptrdiff_t)threads;
    return (count + tasks - 1) / tasks;
}

/* Whether conv2d_gemm takes the grid path for this shape. */
static int grid_suits(const Im2colShape *s) {
    ptrdiff_t wp = s->out_w + (s->kernel_w - 1) * s->dilation_w;
    return s->stride_h == 1 && s->stride_w == 1 && (wp - s->out_w) * GRID_MAX_WASTE <= s->out_w;
}

/* conv2d_gemm's product by the grid (grid_suits): 0, or -1 where a buffer cannot be had.
 * Call without the GIL. */
static int conv_grid_run(const Operand *a, const float *x, const float *bias, float *out,
                         ptrdiff_t batch, const Im2colShape *s, int flags, float alpha) {
    const ptrdiff_t wp = s->out_w + (s->kernel_w - 1) * s->dilation_w;
    const ptrdiff_t rows = s->out_h + (s->kernel_h - 1) * s->dilation_h;
    const ptrdiff_t slack = (s->kernel_w - 1) * s->dilation_w;
    const ptrdiff_t taps = s->kernel_h * s->kernel_w, depth = s->channels * taps;
    const ptrdiff_t columns = s->out_h * wp, plane = s->out_h * s->out_w;
    const ptrdiff_t image = s->channels * s->height * s->width;
    /* the image as it is: no padding, and the grid is the image itself */
    int in_place = s->pad_h == 0 && s->pad_w == 0 && wp == s->width && rows <= s->height &&
                   slack == 0;
    int direct = wp == s->out_w;
    float *padded = in_place ? NULL : pool_staging(0, s->channels * rows * wp + slack);
    float *grid = direct ? NULL : pool_staging(1, a->rows * columns);
    ptrdiff_t *offsets = malloc((size_t)depth * sizeof(ptrdiff_t));
    if ((!in_place && padded == NULL) || (!direct && grid == NULL) || offsets == NULL) {
        free(offsets);
        return -1;
    }
    const ptrdiff_t channel_floats = in_place ? s->height * s->width : rows * wp;
    for (ptrdiff_t c = 0, k = 0; c < s->channels; c++)
        for (ptrdiff_t i = 0; i < s->kernel_h; i++)
            for (ptrdiff_t j = 0; j < s->kernel_w; j++, k++)
                offsets[k] = c * channel_floats + i * s->dilation_h * wp + j * s->dilation_w;
    if (!in_place)
        memset(padded + s->channels * rows * wp, 0, (size_t)slack * sizeof(float));
    int failed = 0;
    for (ptrdiff_t n = 0; n < batch && !failed; n++) {
        const float *source = x + n * image;
        if (!in_place) {
            GridCopy copy = {.from = source, .to = padded, .s = s, .rows = rows, .wp = wp,
                             .per_task = channels_per_task(s->channels, rows * wp)};
            pool_run((s->channels + copy.per_task - 1) / copy.per_task, pad_task, &copy);
            source = padded;
        }
        Operand b = {.data = source, .rows = depth, .cols = columns, .col_stride = 1,
                     .row_offsets = offsets};
        float *target = direct ? out + n * a->rows * plane : grid;
        failed = gemm_run(a, &b, target, columns, bias, flags | GEMM_BIAS_ROWS, alpha, 1, 0);
        if (!failed && !direct) {
            GridCopy copy = {.from = grid, .to = out + n * a->rows * plane, .s = s, .wp = wp,
                             .c_out = a->rows,
                             .per_task = channels_per_task(a->rows, plane)};
            pool_run((a->rows + copy.per_task - 1) / copy.per_task, compact_task, &copy);
        }
    }
    free(offsets);
    return failed;
}

/* conv2d_gemm(x, weight, bias, out, (N, C, H, W), (KH, KW), stride, pad, dilation,
 * (OH, OW), flags): out[n] (C_out x OH * OW) = weight (C_out x C * KH * KW, raw or packed as
 * A) @ im2col(x[n]) (+ bias per row) (ReLU), every image in one call; the im2col matrix is
 * packed block by block from the image, never stored whole. */
static PyObject *py_conv2d_gemm(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *x_object, *a_object, *bias_object, *out_object;
    Im2colShape shape;
    Py_ssize_t batch;
    int flags;
    float alpha = 0.0f;
    if (!PyArg_ParseTuple(args, "OOOO(nnnn)(nn)(nn)(nn)(nn)(nn)i|f", &x_object, &a_object,
                          &bias_object, &out_object, &batch, &shape.channels, &shape.height,
                          &shape.width, &shape.kernel_h, &shape.kernel_w, &shape.stride_h,
                          &shape.stride_w, &shape.pad_h, &shape.pad_w, &shape.dilation_h,
                          &shape.dilation_w, &shape.out_h, &shape.out_w, &flags, &alpha))
        return NULL;
    if (batch < 0 || shape.channels <= 0 || shape.height <= 0 || shape.width <= 0 ||
        shape.kernel_h <= 0 || shape.kernel_w <= 0 || shape.stride_h <= 0 ||
        shape.stride_w <= 0 || shape.pad_h < 0 || shape.pad_w < 0 || shape.dilation_h <= 0 ||
        shape.dilation_w <= 0 || shape.out_h <= 0 || shape.out_w <= 0) {
        PyErr_SetString(PyExc_ValueError, "conv2d_gemm: channels, sizes, kernel, stride, "
                        "dilation and output size must be > 0, batch and padding >= 0");
        return NULL;
    }
    if ((flags & ~GEMM_ACTIVATION_MASK) != 0 ||
        (flags & GEMM_ACTIVATION_MASK) > GEMM_LAST_ACTIVATION) {
        PyErr_Format(PyExc_ValueError, "argument 'flags' = %d is invalid", flags);
        return NULL;
    }
    /* sizes in doubles first: every product below then fits (the buffers' lengths bound
     * them); an output row past the image's reach is fine (its reads are guarded) */
    double image = (double)shape.channels * (double)shape.height * (double)shape.width;
    double depth = (double)shape.channels * (double)shape.kernel_h * (double)shape.kernel_w;
    double locations = (double)shape.out_h * (double)shape.out_w;
    double reach_h = ((double)shape.out_h - 1) * shape.stride_h +
                     ((double)shape.kernel_h - 1) * shape.dilation_h;
    double reach_w = ((double)shape.out_w - 1) * shape.stride_w +
                     ((double)shape.kernel_w - 1) * shape.dilation_w;
    if (image * (batch > 0 ? batch : 1) > (double)PY_SSIZE_T_MAX / 8 ||
        depth * locations > (double)PY_SSIZE_T_MAX / 8 || reach_h + shape.pad_h > 1e15 ||
        reach_w + shape.pad_w > 1e15) {
        PyErr_SetString(PyExc_OverflowError, "conv2d_gemm: sizes overflow");
        return NULL;
    }
    Py_buffer a_view, x_view, out_view, bias_view;
    Operand a;
    Py_ssize_t a_batch;
    if (get_operand(a_object, GEMM_LEFT, "weight", &a_view, &a, &a_batch) != 0)
        return NULL;
    PyObject *result = NULL;
    int have_x = 0, have_out = 0, have_bias = 0;
    if (a_batch || a.cols != (ptrdiff_t)depth) {
        PyErr_Format(PyExc_ValueError, "argument 'weight' must be one C_out x %zd matrix "
                     "(C x KH x KW)", (Py_ssize_t)depth);
        goto done;
    }
    ptrdiff_t c_out = a.rows, plane = shape.out_h * shape.out_w;
    ptrdiff_t x_count = batch * shape.channels * shape.height * shape.width;
    if (PyObject_GetBuffer(x_object, &x_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
        goto done;
    have_x = 1;
    if (PyObject_GetBuffer(out_object, &out_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                                                      PyBUF_WRITABLE) != 0)
        goto done;
    have_out = 1;
    if (x_view.itemsize != 4 || x_view.format == NULL || strcmp(x_view.format, "f") != 0 ||
        x_view.len / 4 != x_count) {
        PyErr_Format(PyExc_ValueError, "argument 'x' must be %zd float32 values", x_count);
        goto done;
    }
    if ((double)c_out * locations * (batch > 0 ? batch : 1) > (double)PY_SSIZE_T_MAX / 8 ||
        out_view.itemsize != 4 || out_view.format == NULL ||
        strcmp(out_view.format, "f") != 0 || out_view.len / 4 != batch * c_out * plane) {
        PyErr_Format(PyExc_ValueError, "argument 'out' must be N x C_out x OH x OW = %zd x %zd "
                     "x %zd x %zd float32 values", batch, c_out, shape.out_h, shape.out_w);
        goto done;
    }
    if (bias_object != Py_None) {
        if (PyObject_GetBuffer(bias_object, &bias_view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
            goto done;
        have_bias = 1;
        if (bias_view.itemsize != 4 || bias_view.format == NULL ||
            strcmp(bias_view.format, "f") != 0 || bias_view.len / 4 != c_out) {
            PyErr_Format(PyExc_ValueError, "argument 'bias' must be %zd float32 values", c_out);
            goto done;
        }
    }
    Operand b = {.data = x_view.buf, .rows = (ptrdiff_t)depth, .cols = plane,
                 .batch_stride = shape.channels * shape.height * shape.width,
                 .im2col = &shape};
    int failed;
    Py_BEGIN_ALLOW_THREADS
    if (grid_suits(&shape) && USE_GRID)
        failed = conv_grid_run(&a, x_view.buf, have_bias ? bias_view.buf : NULL,
                               out_view.buf, batch, &shape, flags, alpha);
    else
        failed = gemm_run(&a, &b, out_view.buf, plane, have_bias ? bias_view.buf : NULL,
                          flags | GEMM_BIAS_ROWS, alpha, batch, c_out * plane);
    Py_END_ALLOW_THREADS
    result = failed ? PyErr_NoMemory() : Py_NewRef(Py_None);
done:
    if (have_bias)
        PyBuffer_Release(&bias_view);
    if (have_out)
        PyBuffer_Release(&out_view);
    if (have_x)
        PyBuffer_Release(&x_view);
    PyBuffer_Release(&a_view);
    return result;
}

static PyObject *py_gemm_info(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args)) {
    const Isa *isa = current_isa();
    return Py_BuildValue("{s:s,s:i,s:i,s:n}", "isa", isa->name, "mr", MR, "nr", isa->nr, "kc",
                         (Py_ssize_t)isa->kc);
}

static PyObject *py_gemm_set_isa(PyObject *Py_UNUSED(self), PyObject *args) {
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name))
        return NULL;
    for (int i = 0; i < ISA_COUNT; i++)
        if (strcmp(ISAS[i].name, name) == 0) {
            if (!isa_supported(&ISAS[i]))
                Py_RETURN_FALSE;
            isa_in_use = &ISAS[i];
            Py_RETURN_TRUE;
        }
    PyErr_Format(PyExc_ValueError, "argument 'isa' = '%s' is invalid", name);
    return NULL;
}

static PyObject *py_pool_threads(PyObject *Py_UNUSED(self), PyObject *args) {
    int threads = -1;
    if (!PyArg_ParseTuple(args, "|i", &threads))
        return NULL;
    if (threads != -1) {
        int failed;
        Py_BEGIN_ALLOW_THREADS
        failed = pool_set_threads(threads);
        Py_END_ALLOW_THREADS
        if (failed) {
            PyErr_Format(PyExc_ValueError, "argument 'threads' = %d is invalid: 1 to %d",
                         threads, POOL_MAX_THREADS);
            return NULL;
        }
    }
    return PyLong_FromLong(pool_threads());
}

static PyObject *py_pool_spin_us(PyObject *Py_UNUSED(self), PyObject *args) {
    long microseconds = -1;
    if (!PyArg_ParseTuple(args, "|l", &microseconds))
        return NULL;
    if (microseconds >= 0)
        pool_set_spin_us(microseconds);
    return PyLong_FromLong(pool_spin_us());
}

PyMethodDef native_gemm_methods[] = {
    {"gemm", py_gemm, METH_VARARGS,
     "gemm(a, b, out, bias, flags): out = a @ b (float32), a and b 2-D buffers (any "
     "non-negative strides) or packed matrices (data, rows, cols, side, nr, kc); out has "
     "contiguous rows and overlaps nothing else. flags: 1 ReLU, 16 bias per row (else per "
     "column), 32 accumulate (out += a @ b); bias None or its floats."},
    {"gemm_pack", py_gemm_pack, METH_VARARGS,
     "gemm_pack(matrix, side, out): a 2-D float32 matrix packed as the left (0) or right "
     "(1) operand into out (gemm_packed_size floats)."},
    {"gemm_packed_size", py_gemm_packed_size, METH_VARARGS,
     "gemm_packed_size(rows, cols, side): the float32 count of a packed rows x cols matrix."},
    {"gemm_info", py_gemm_info, METH_NOARGS,
     "gemm_info(): the microkernel in use: {'isa', 'mr', 'nr', 'kc'}."},
    {"conv2d_gemm", py_conv2d_gemm, METH_VARARGS,
     "conv2d_gemm(x, weight, bias, out, (N, C, H, W), (KH, KW), stride, pad, dilation, "
     "(OH, OW), flags, alpha=0): a 2-d convolution (one group) as the packed GEMM of the "
     "weight (C_out x C*KH*KW, raw or packed as the left operand) with each image's im2col "
     "matrix, "
     "packed from the image block by block; bias per output channel, flags: the activation "
     "(1 ReLU, 2 Hardswish, 3 Sigmoid, 4 SiLU, 5 LeakyRelu of slope alpha, 6 GELU's erf "
     "form)."},
    {"gemm_set_isa", py_gemm_set_isa, METH_VARARGS,
     "gemm_set_isa(name): use the 'avx512', 'avx2' or 'baseline' kernel (tests); False "
     "where the CPU lacks it. Packed matrices of another ISA are refused afterwards."},
    {"pool_threads", py_pool_threads, METH_VARARGS,
     "pool_threads([n]): the C kernels' thread count, set first when n is given (1-256)."},
    {"pool_spin_us", py_pool_spin_us, METH_VARARGS,
     "pool_spin_us([us]): how long idle workers spin before sleeping, set first if given."},
    {NULL, NULL, 0, NULL},
};
