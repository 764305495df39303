/* openacl._native: fused float32 kernels for the CPU backend's hot operators.
 *
 * Why: numpy evaluates GELU's erf form, softmax, a LayerNorm or a depthwise convolution as
 * 4-30 passes over memory with a temporary each; these loops do one pass, vectorised by the
 * compiler (gcc on x86-64: AVX-512, AVX2/FMA and baseline clones chosen at load time).
 *
 * Contract (every function): arguments are C-contiguous float32 buffers (float64 where
 * named; the buffer protocol checks contiguity, the format and, for outputs, writability);
 * every size is checked, with overflow-checked arithmetic, against the buffers' lengths
 * before anything is read or written, so no argument values can make a kernel touch memory
 * outside its buffers; the GIL is released while the loop runs. Row and elementwise kernels
 * accept outputs that are their inputs (the very same elements); any other overlap is the
 * caller's responsibility (openacl.ops.native's callers pass disjoint buffers or fall back to
 * numpy). NaN propagates and infinities give their limits, as the numpy kernels do.
 *
 * Invariants of the convolution kernels: tap sums read whole vectors, up to VECTOR_LANES - 1
 * floats past the last element they use, so every source they read is followed by that many
 * readable floats (conv2d_direct's scratch has a zeroed margin; shifted_sums checks its
 * caller's margin). conv2d_direct's work items use their thread's scratch (pool_scratch),
 * written before it is read within the item, so nothing carries over between items or calls.
 *
 * Parallel loops (conv2d_direct, shifted_sums, the elementwise and softmax kernels, the
 * tree walk) run on the pool of _native_pool.c; their tasks write disjoint parts of the
 * output.
 *
 * The tree walk (tree_leaves) also takes int32, int8 and int64 buffers and follows indices
 * read from them: it checks each one before it reads through it (see "tree ensembles").
 *
 * This module is optional: openacl.ops.native falls back to numpy when it is missing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "_native_gemm.h"
#include "_native_pool.h"
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define X86_KERNELS 1
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MULTIVERSIONED \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MULTIVERSIONED
#endif
#define INLINE static inline __attribute__((always_inline))

/* -- exp: Cephes' range reduction and polynomial, written so that loops vectorise ------- */
#define EXP_HI 88.72283935546875f  /* above: +inf */
#define EXP_LO -87.33654022216797f /* below: 0 (float32's normal range ends here) */
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO -2.12194440e-4f
#define ROUNDING_SHIFTER 12582912.0f /* 1.5 * 2^23: adding it rounds to an integer */

INLINE float bits_to_float(uint32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

INLINE int32_t float_to_bits(float value) {
    int32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* exp(x) within ~2 ulp; NaN -> NaN, +inf -> inf, -inf and anything below EXP_LO -> 0. */
INLINE float fast_exp(float x) {
    float clamped = x > EXP_HI ? EXP_HI : x;
    clamped = clamped < EXP_LO ? EXP_LO : clamped;
    float shifted = clamped * LOG2E + ROUNDING_SHIFTER;
    float n = shifted - ROUNDING_SHIFTER;
    int32_t exponent = float_to_bits(shifted) - float_to_bits(ROUNDING_SHIFTER);
    float r = clamped - n * LN2_HI;
    r = r - n * LN2_LO;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    /* 2^n in two halves: n reaches 128 at EXP_HI, one past float32's largest exponent */
    int32_t half = exponent >> 1;
    /* unsigned shifts: a NaN's meaningless exponent must not overflow (its result is
     * replaced below) */
    y = y * bits_to_float((uint32_t)(half + 127) << 23) *
        bits_to_float((uint32_t)(exponent - half + 127) << 23);
    y = x > EXP_HI ? INFINITY : y;
    y = x < EXP_LO ? 0.0f : y;
    return x != x ? x : y;
}

/* -- GELU, erf form: x * Phi(x) = max(x, 0) - |x| * Phi(-|x|) ---------------------------- */
/* Phi(-a) = 0.5 * erfc(a / sqrt 2) by Numerical Recipes' erfcc (fractional error < 1.2e-7):
 * t = 1 / (1 + a / (2 sqrt 2)), Phi(-a) = t * exp(-a^2 / 2 + P(t)), ln 0.5 folded into P's
 * constant term; the same algorithm as the numpy kernel (openacl.ops._special). */
#define NORMAL_TAIL_CLAMP 16.0f /* Phi(-16) ~ 6e-58, 0 in float32: the numpy kernel's clamp */
#define HALF_OVER_SQRT2 0.35355339059327373f
#define HALF_ERFC_C0 (-1.26551223f - 0.69314718055994531f)

INLINE float gelu_erf(float x) {
    float a = x < 0.0f ? -x : x;
    a = a < NORMAL_TAIL_CLAMP ? a : NORMAL_TAIL_CLAMP; /* inf -> the limits inf and 0 */
    float t = 1.0f / (1.0f + a * HALF_OVER_SQRT2);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t + HALF_ERFC_C0;
    float tail = t * fast_exp(p - 0.5f * a * a); /* 0 where exp's result is subnormal */
    float positive = x > 0.0f ? x : 0.0f;
    float y = positive - a * tail;
    return x != x ? x : y;
}

MULTIVERSIONED
static void gelu_erf_loop(const float *x, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = gelu_erf(x[i]);
}

/* -- Hardswish: x * clip(x + 3, 0, 6) / 6 ------------------------------------------------- */
/* (x + 3 is exact near -3, where x / 6 + 1/2 would cancel to a few correct bits) */
MULTIVERSIONED
static void hardswish_loop(const float *x, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        float v = x[i];
        float gate = v + 3.0f;
        gate = gate > 0.0f ? gate : 0.0f;
        gate = gate < 6.0f ? gate : 6.0f;
        float y = v * (gate / 6.0f); /* (v * gate could overflow) */
        out[i] = v != v ? v : y; /* clip would turn a NaN gate into 0 or 1 */
    }
}

/* -- softmax over contiguous rows ---------------------------------------------------------- */
#define LANES 16 /* independent partial maxima/sums: lets the loops vectorise in order */

/* the largest element of a row; NaN is skipped (the exps of the row make it NaN anyway).
 * Spelled with vector types: the compiler does not vectorise a float max reduction
 * without -ffinite-math-only, which would break NaN and inf elsewhere */
typedef float FloatLanes __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t IntLanes __attribute__((vector_size(LANES * sizeof(float))));

INLINE float row_max(const float *in, Py_ssize_t length) {
    FloatLanes lane;
    for (int j = 0; j < LANES; j++) lane[j] = -INFINITY;
    Py_ssize_t body = length - length % LANES, i;
    for (i = 0; i < body; i += LANES) {
        FloatLanes values;
        memcpy(&values, in + i, sizeof values);
        IntLanes greater = values > lane;
        lane = (FloatLanes)((greater & (IntLanes)values) | (~greater & (IntLanes)lane));
    }
    float best = -INFINITY;
    for (int j = 0; j < LANES; j++) best = lane[j] > best ? lane[j] : best;
    for (; i < length; i++) best = in[i] > best ? in[i] : best;
    return best;
}

INLINE float row_sum(const float *values, Py_ssize_t length) {
    float lane[LANES] = {0};
    Py_ssize_t body = length - length % LANES, i;
    for (i = 0; i < body; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += values[i + j];
    float total = 0.0f;
    for (int j = 0; j < LANES; j++) total += lane[j];
    for (; i < length; i++) total += values[i];
    return total;
}

/* x and out are the same rows or apart: each element is read before it is written */
MULTIVERSIONED
static void softmax_rows_loop(const float *x, float *out, Py_ssize_t rows, Py_ssize_t length) {
    for (Py_ssize_t row = 0; row < rows; row++) {
        const float *in = x + row * length;
        float *o = out + row * length;
        /* a row holding +inf, or all -inf, gives inf - inf = NaN: torch's results */
        float shift = row_max(in, length);
        for (Py_ssize_t i = 0; i < length; i++) o[i] = fast_exp(in[i] - shift);
        float scale = 1.0f / row_sum(o, length);
        for (Py_ssize_t i = 0; i < length; i++) o[i] *= scale;
    }
}

/* ScaledMaskedSoftmax: softmax over rows of scale * x with masked positions (mask true)
 * set to MASKED_SCORE, CANN's fill value; x is (B, C, S1, S2) and the boolean mask
 * (mask_b, mask_c, S1, S2) with mask_b in {1, B} and mask_c in {1, C} (broadcast). */
#define MASKED_SCORE -10000.0f

typedef struct {
    Py_ssize_t batch, channels, rows, length, mask_batch, mask_channels;
    float scale;
} MaskedSoftmax;

MULTIVERSIONED
static void masked_softmax_loop(const float *x, const unsigned char *mask, float *out,
                                const MaskedSoftmax *m) {
    for (Py_ssize_t b = 0; b < m->batch; b++)
        for (Py_ssize_t c = 0; c < m->channels; c++) {
            Py_ssize_t plane = (b * m->channels + c) * m->rows * m->length;
            Py_ssize_t mask_plane = ((m->mask_batch > 1 ? b : 0) * m->mask_channels +
                                     (m->mask_channels > 1 ? c : 0)) * m->rows * m->length;
            for (Py_ssize_t r = 0; r < m->rows; r++) {
                const float *in = x + plane + r * m->length;
                const unsigned char *hidden = mask + mask_plane + r * m->length;
                float *o = out + plane + r * m->length;
                for (Py_ssize_t i = 0; i < m->length; i++)
                    o[i] = hidden[i] ? MASKED_SCORE : in[i] * m->scale;
                float shift = row_max(o, m->length);
                for (Py_ssize_t i = 0; i < m->length; i++) o[i] = fast_exp(o[i] - shift);
                float inverse = 1.0f / row_sum(o, m->length);
                for (Py_ssize_t i = 0; i < m->length; i++) o[i] *= inverse;
            }
        }
}

/* -- LayerNorm over contiguous rows ------------------------------------------------------ */
/* Moments in float64 lanes (two passes: the mean, then the centred squares), so long rows
 * keep float32 accuracy; y = (x - mean) * rstd, then * weight + bias in float32. */
INLINE double row_sum_double(const float *in, Py_ssize_t length, double centre) {
    double lane[LANES] = {0};
    Py_ssize_t body = length - length % LANES, i;
    for (i = 0; i < body; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += (double)in[i + j] - centre;
    double total = 0.0;
    for (int j = 0; j < LANES; j++) total += lane[j];
    for (; i < length; i++) total += (double)in[i] - centre;
    return total;
}

INLINE double row_centred_squares(const float *in, Py_ssize_t length, double mean) {
    double lane[LANES] = {0};
    Py_ssize_t body = length - length % LANES, i;
    for (i = 0; i < body; i += LANES)
        for (int j = 0; j < LANES; j++) {
            double d = (double)in[i + j] - mean;
            lane[j] += d * d;
        }
    double total = 0.0;
    for (int j = 0; j < LANES; j++) total += lane[j];
    for (; i < length; i++) {
        double d = (double)in[i] - mean;
        total += d * d;
    }
    return total;
}

/* AddLayerNorm: x = x1 + x2 (+ bias: one row, or full rows) into x_out when given, else
 * into y's row (where it is normalized in place): the row stays in cache for the moments
 * and the normalization, one pass over memory for the sum and one for y. */
typedef struct {
    const float *x1, *x2, *bias, *gamma, *beta;
    float *y, *x_out, *means, *rstds;
    Py_ssize_t rows, length, bias_row_stride; /* 0: one bias row for all rows */
    double eps;
} AddLayerNorm;

MULTIVERSIONED
static void add_layer_norm_loop(const AddLayerNorm *a) {
    for (Py_ssize_t row = 0; row < a->rows; row++) {
        const float *in1 = a->x1 + row * a->length, *in2 = a->x2 + row * a->length;
        float *o = a->y + row * a->length;
        float *sum = a->x_out ? a->x_out + row * a->length : o;
        if (a->bias) {
            const float *b = a->bias + row * a->bias_row_stride;
            for (Py_ssize_t i = 0; i < a->length; i++) sum[i] = in1[i] + in2[i] + b[i];
        } else {
            for (Py_ssize_t i = 0; i < a->length; i++) sum[i] = in1[i] + in2[i];
        }
        double mean = row_sum_double(sum, a->length, 0.0) / (double)a->length;
        double variance = row_centred_squares(sum, a->length, mean) / (double)a->length;
        double rstd = 1.0 / sqrt(variance + a->eps);
        a->means[row] = (float)mean;
        a->rstds[row] = (float)rstd;
        for (Py_ssize_t i = 0; i < a->length; i++)
            o[i] = (float)(((double)sum[i] - mean) * rstd) * a->gamma[i] + a->beta[i];
    }
}

MULTIVERSIONED
static void row_sums_loop(const float *x, double *out, Py_ssize_t rows, Py_ssize_t length) {
    for (Py_ssize_t row = 0; row < rows; row++)
        out[row] = row_sum_double(x + row * length, length, 0.0);
}

MULTIVERSIONED
static void layer_norm_loop(const float *x, const float *weight, const float *bias, float *out,
                            float *means, float *rstds, Py_ssize_t rows, Py_ssize_t length,
                            double eps) {
    for (Py_ssize_t row = 0; row < rows; row++) {
        const float *in = x + row * length;
        float *o = out + row * length;
        double mean = row_sum_double(in, length, 0.0) / (double)length;
        double variance = row_centred_squares(in, length, mean) / (double)length;
        double rstd = 1.0 / sqrt(variance + eps);
        means[row] = (float)mean;
        rstds[row] = (float)rstd;
        /* centred in float64: x - mean cancels, and a float32 mean would leave its rounding
         * error (~ulp(mean)) in every small normalized value */
        if (weight && bias) {
            for (Py_ssize_t i = 0; i < length; i++)
                o[i] = (float)(((double)in[i] - mean) * rstd) * weight[i] + bias[i];
        } else if (weight) {
            for (Py_ssize_t i = 0; i < length; i++)
                o[i] = (float)(((double)in[i] - mean) * rstd) * weight[i];
        } else if (bias) {
            for (Py_ssize_t i = 0; i < length; i++)
                o[i] = (float)(((double)in[i] - mean) * rstd) + bias[i];
        } else {
            for (Py_ssize_t i = 0; i < length; i++)
                o[i] = (float)(((double)in[i] - mean) * rstd);
        }
    }
}

/* -- depthwise 2-d convolution, NCHW, any stride, padding and dilation ---------------------- */
/* Each channel's plane is first copied into a zero-bordered scratch plane holding exactly
 * the rows and columns the outputs read, its columns split by phase (column c at phase
 * c % stride_w, position c / stride_w), so that every kernel tap reads a contiguous run
 * for consecutive outputs and no loop checks bounds. Outputs are computed 4 vectors at a
 * time with every tap accumulated in registers (one store per output). With stride 1 the
 * loops run over the scratch plane's flat layout (rows of pitch `pitch`; the pitch - OW
 * extra columns of each row are computed and dropped), so they stay long on 20-wide planes.
 * Work is cut into items of (image, group, block of output rows), run on the pool; each
 * item copies the input rows its block reads into its thread's scratch (pool_scratch), and
 * items write disjoint output rows. */
typedef struct {
    Py_ssize_t batch, channels, height, width, out_channels, groups;
    Py_ssize_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
    Py_ssize_t out_h, out_w;
} ConvGeometry;

#define VECTOR_LANES 16 /* the widest vector (AVX-512): readable floats after a source */
#define MAX_TAPS 64 /* tap offsets on the stack; larger kernels go by groups of taps */
#define CONV_ITEM_WORK 65536 /* multiply-adds per work item (a block of output rows) */
#define CONV_SERIAL_WORK 262144 /* fewer run on the caller alone (the GEMM's rule) */

/* the scratch plane: `rows` rows of `pitch` floats, each row `phases` runs of `run`, from
 * padded row `first_row` on. Only the margins are zeroed and the bounds of each phase are
 * worked out once per call (on a small plane this copy costs more than a 3x3 layer's
 * sums). */
#define PHASED_MAX 8 /* strides up to this have their phase bounds computed once */

INLINE void zero_floats(float *line, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) line[i] = 0.0f;
}

/* phase p holds padded columns pos * phases + p: positions [*lo, *hi) of it hold the input
 * columns [first, last) */
INLINE void phase_bounds(Py_ssize_t first, Py_ssize_t last, Py_ssize_t p, Py_ssize_t phases,
                         Py_ssize_t *lo, Py_ssize_t *hi) {
    *lo = first > p ? (first - p + phases - 1) / phases : 0;
    *hi = last > p ? (last - p + phases - 1) / phases : 0;
}

MULTIVERSIONED
static void copy_phased(const float *restrict in, float *restrict padded, const ConvGeometry *g,
                        Py_ssize_t first_row, Py_ssize_t rows, Py_ssize_t columns,
                        Py_ssize_t run) {
    Py_ssize_t phases = g->stride_w, pitch = phases * run;
    Py_ssize_t first = g->pad_w, last = g->pad_w + g->width; /* columns holding input */
    if (last > columns) last = columns;
    if (first > last) first = last;
    Py_ssize_t lo[PHASED_MAX], hi[PHASED_MAX];
    for (Py_ssize_t p = 0; p < phases && p < PHASED_MAX; p++)
        phase_bounds(first, last, p, phases, &lo[p], &hi[p]);
    for (Py_ssize_t r = 0; r < rows; r++) {
        float *line = padded + r * pitch;
        Py_ssize_t source_row = first_row + r - g->pad_h;
        if (source_row < 0 || source_row >= g->height || first == last) {
            memset(line, 0, (size_t)pitch * sizeof(float));
            continue;
        }
        const float *restrict source = in + source_row * g->width - g->pad_w; /* column 0 */
        if (phases == 1) {
            zero_floats(line, first);
            memcpy(line + first, source + first, (size_t)(last - first) * sizeof(float));
            zero_floats(line + last, pitch - last);
            continue;
        }
        for (Py_ssize_t p = 0; p < phases; p++) {
            Py_ssize_t low, high;
            if (p < PHASED_MAX) {
                low = lo[p];
                high = hi[p];
            } else {
                phase_bounds(first, last, p, phases, &low, &high);
            }
            float *target = line + p * run;
            const float *origin = source + p; /* column p */
            zero_floats(target, low);
            if (phases == 2) /* a constant step: the loop vectorises */
                for (Py_ssize_t pos = low; pos < high; pos++) target[pos] = origin[2 * pos];
            else
                for (Py_ssize_t pos = low; pos < high; pos++) target[pos] = origin[pos * phases];
            zero_floats(target + high, run - high);
        }
    }
}

/* out[r * out_pitch + i] = start + sum_t weights[t] * source[r * source_pitch + i + offsets[t]]
 * for i < count and r < rows (taps <= MAX_TAPS): one function per vector width, from one
 * body (the GEMM's ISA picks it: tap_sums_kernel). Four accumulators of the machine's own
 * width and the weights broadcast once per call (a strided depthwise layer's rows are a
 * few vectors each: per-row calls cost more than their sums); GCC lowers a vector wider
 * than the machine's, or a scalar times one, through the stack. */
typedef void (*TapSums)(const float *source, Py_ssize_t source_pitch,
                        const Py_ssize_t *offsets, const float *weights, Py_ssize_t taps,
                        float start, float *out, Py_ssize_t out_pitch, Py_ssize_t count,
                        Py_ssize_t rows);

#define DEFINE_TAP_SUMS(NAME, TARGET, V, W)                                                 \
    TARGET static void NAME(const float *source, Py_ssize_t source_pitch,                 \
                            const Py_ssize_t *offsets, const float *weights,              \
                            Py_ssize_t taps, float start, float *out,                     \
                            Py_ssize_t out_pitch, Py_ssize_t count, Py_ssize_t rows) {    \
        V broadcast[MAX_TAPS];                                                              \
        for (Py_ssize_t t = 0; t < taps; t++) broadcast[t] = (V){0} + weights[t];         \
        V first = (V){0} + start;                                                           \
        for (Py_ssize_t r = 0; r < rows; r++, source += source_pitch, out += out_pitch) {  \
            Py_ssize_t i = 0;                                                               \
            for (; i + 4 * W <= count; i += 4 * W) {                                        \
                V a0 = first, a1 = first, a2 = first, a3 = first;                           \
                for (Py_ssize_t t = 0; t < taps; t++) {                                     \
                    const float *s = source + i + offsets[t];                               \
                    V weight = broadcast[t];                                                \
                    a0 += weight * *(const V *)s;                                           \
                    a1 += weight * *(const V *)(s + W);                                     \
                    a2 += weight * *(const V *)(s + 2 * W);                                 \
                    a3 += weight * *(const V *)(s + 3 * W);                                 \
                }                                                                           \
                *(V *)(out + i) = a0;                                                       \
                *(V *)(out + i + W) = a1;                                                   \
                *(V *)(out + i + 2 * W) = a2;                                               \
                *(V *)(out + i + 3 * W) = a3;                                               \
            }                                                                               \
            for (; i < count; i += W) { /* the last partial vector reads up to W - 1      \
                                         * floats past the row (its callers' margin) */    \
                V acc = first;                                                              \
                for (Py_ssize_t t = 0; t < taps; t++)                                       \
                    acc += broadcast[t] * *(const V *)(source + i + offsets[t]);            \
                if (i + W <= count) {                                                       \
                    *(V *)(out + i) = acc;                                                  \
                } else {                                                                    \
                    float lanes[W];                                                         \
                    memcpy(lanes, &acc, sizeof acc);                                        \
                    memcpy(out + i, lanes, (size_t)(count - i) * sizeof(float));            \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }

/* unaligned vector types (aligned(4)): scratch rows and output rows need no alignment */
typedef float tap_v4 __attribute__((vector_size(16), aligned(4)));
DEFINE_TAP_SUMS(tap_sums_4, , tap_v4, 4)
#ifdef X86_KERNELS
typedef float tap_v8 __attribute__((vector_size(32), aligned(4)));
typedef float tap_v16 __attribute__((vector_size(64), aligned(4)));
DEFINE_TAP_SUMS(tap_sums_8, __attribute__((target("avx2,fma"))), tap_v8, 8)
DEFINE_TAP_SUMS(tap_sums_16, __attribute__((target("avx512f"))), tap_v16, 16)
#endif

static TapSums tap_sums_kernel(void) {
#ifdef X86_KERNELS
    const char *isa = gemm_isa_name();
    if (strcmp(isa, "avx512") == 0) return tap_sums_16;
    if (strcmp(isa, "avx2") == 0) return tap_sums_8;
#endif
    return tap_sums_4;
}

/* the parts of a direct convolution shared by its work items */
typedef struct {
    const float *x, *w, *bias;
    float *out;
    const ConvGeometry *g;
    TapSums tap_sums;
    const Py_ssize_t *offsets; /* per tap of a group's channel (ci, kh, kw) */
    Py_ssize_t columns, run, pitch, plane_floats, group_in, group_out, taps;
    Py_ssize_t block_rows, blocks, items, per_task, scratch_floats;
    int activation; /* then this activation (_native_gemm.h's codes) on every output */
    float alpha;    /* its parameter */
    atomic_int failed; /* a task found no scratch */
} DirectConv;

/* `rows` rows of `count` outputs (out_pitch apart) = start + the taps of weights, the rows'
 * sources source_pitch apart; any tap count: more than MAX_TAPS go by groups of MAX_TAPS,
 * row by row, summed through `partial` (count floats) */
static void conv_taps(const DirectConv *job, const float *source, Py_ssize_t source_pitch,
                      const float *weights, float start, float *out, Py_ssize_t out_pitch,
                      float *partial, Py_ssize_t count, Py_ssize_t rows) {
    if (job->taps <= MAX_TAPS) {
        job->tap_sums(source, source_pitch, job->offsets, weights, job->taps, start, out,
                      out_pitch, count, rows);
        return;
    }
    for (Py_ssize_t r = 0; r < rows; r++, source += source_pitch, out += out_pitch)
        for (Py_ssize_t first = 0; first < job->taps; first += MAX_TAPS) {
            Py_ssize_t taps = job->taps - first < MAX_TAPS ? job->taps - first : MAX_TAPS;
            job->tap_sums(source, 0, job->offsets + first, weights + first, taps,
                          first ? 0.0f : start, first ? partial : out, 0, count, 1);
            if (first)
                for (Py_ssize_t i = 0; i < count; i++) out[i] += partial[i];
        }
}

/* out = the job's activation of in (in may be out); none: a copy */
static void activate(const DirectConv *job, const float *in, float *out, Py_ssize_t count) {
    RowActivation apply = native_row_activation(job->activation);
    if (apply != NULL)
        apply(in, out, count, job->alpha);
    else if (in != out)
        memcpy(out, in, (size_t)count * sizeof(float));
}

static void direct_conv_item(const DirectConv *job, Py_ssize_t item, float *padded) {
    const ConvGeometry *g = job->g;
    Py_ssize_t block = item % job->blocks, group = item / job->blocks % g->groups;
    Py_ssize_t image = item / job->blocks / g->groups;
    Py_ssize_t first_oh = block * job->block_rows;
    Py_ssize_t out_rows = g->out_h - first_oh < job->block_rows ? g->out_h - first_oh
                                                                 : job->block_rows;
    Py_ssize_t in_rows = (out_rows - 1) * g->stride_h + (g->kernel_h - 1) * g->dilation_h + 1;
    for (Py_ssize_t ci = 0; ci < job->group_in; ci++) {
        Py_ssize_t plane = image * g->channels + group * job->group_in + ci;
        copy_phased(job->x + plane * g->height * g->width, padded + ci * job->plane_floats, g,
                    first_oh * g->stride_h, in_rows, job->columns, job->run);
    }
    /* after the planes: the zeroed margin, then the sums and partial sums */
    float *sums = padded + job->group_in * job->plane_floats + VECTOR_LANES;
    Py_ssize_t first_out = image * g->out_channels + group * job->group_out;
    if (g->stride_h == 1 && g->stride_w == 1 && job->group_out == 1) {
        /* one output channel: the block's rows as one flat run over the scratch rows (long
         * vectors on narrow planes), copied out row by row */
        Py_ssize_t co = group, count = (out_rows - 1) * job->pitch + g->out_w;
        conv_taps(job, padded, 0, job->w + co * job->taps, job->bias ? job->bias[co] : 0.0f,
                  sums, 0, sums + job->plane_floats, count, 1);
        float *o = job->out + (first_out * g->out_h + first_oh) * g->out_w;
        for (Py_ssize_t r = 0; r < out_rows; r++)
            activate(job, sums + r * job->pitch, o + r * g->out_w, g->out_w);
        return;
    }
    /* each output channel of the group in turn, all the block's rows in one pass straight
     * into the output (the block's input rows stay in cache) */
    for (Py_ssize_t oc = 0; oc < job->group_out; oc++) {
        Py_ssize_t co = group * job->group_out + oc;
        float *row = job->out + ((first_out + oc) * g->out_h + first_oh) * g->out_w;
        conv_taps(job, padded, g->stride_h * job->pitch, job->w + co * job->taps,
                  job->bias ? job->bias[co] : 0.0f, row, g->out_w, sums, g->out_w, out_rows);
        if (job->activation) /* the rows just written, still in cache */
            activate(job, row, row, out_rows * g->out_w);
    }
}

static void direct_conv_task(void *context, ptrdiff_t task) {
    DirectConv *job = context;
    float *padded = pool_scratch(job->scratch_floats);
    if (padded == NULL) {
        atomic_store(&job->failed, 1);
        return;
    }
    /* the zeroed margin after the planes: tap sums' last partial vector reads into it */
    memset(padded + job->group_in * job->plane_floats, 0, VECTOR_LANES * sizeof(float));
    Py_ssize_t first = task * job->per_task;
    Py_ssize_t last = first + job->per_task < job->items ? first + job->per_task : job->items;
    for (Py_ssize_t item = first; item < last; item++)
        direct_conv_item(job, item, padded);
}

/* -- depthwise by channel lanes ---------------------------------------------------------
 * A depthwise convolution (one input and one output channel per group, taps <= MAX_TAPS)
 * computed for a vector's width of channels at once, one channel per lane: the channels'
 * input rows that a block of output rows reads are interleaved into scratch (position by
 * position, W floats each, zero outside the image), every output position is then a run of
 * full-vector multiply-adds over the taps, in tap order from the bias (the per-channel
 * path's order: the same sums), the activation runs over the block, and the lanes are
 * written back to their channels' planes. No partial vectors on narrow or strided planes
 * and no per-channel calls. Items: (image, block of W channels, block of output rows). */
typedef struct {
    const float *x, *w, *bias;
    float *out;
    const ConvGeometry *g;
    Py_ssize_t lanes, lane_groups, block_rows, blocks, items, per_task, scratch_floats;
    Py_ssize_t columns; /* padded input columns the outputs read */
    int activation;
    float alpha;
    atomic_int failed;
} LaneConv;

#define LANE_OUTPUTS 8 /* output positions per pass: their accumulators in registers */
#ifndef LANE_DEPTHWISE
#define LANE_DEPTHWISE 1 /* 0: every depthwise layer by the per-channel tap sums */
#endif
/* Where lanes pay (measured, 2 cores, AVX-512): on output planes up to this wide, where the
 * per-channel sums run partial vectors and per-channel calls (5 x 5 taps: 1.4-2.9x faster
 * at 7 and 14 wide, 3 x 3: even to 1.4x); on wider ones their interleaving (a few moves per
 * input and output position) costs more than it saves (3 x 3 at 56: 1.8x slower). */
#define LANE_MAX_WIDTH 16

#define DEFINE_LANE_DEPTHWISE(NAME, TARGET, V, W)                                           \
    TARGET static void NAME(const LaneConv *job, Py_ssize_t item, float *scratch) {         \
        const ConvGeometry *g = job->g;                                                     \
        const Py_ssize_t block = item % job->blocks;                                        \
        const Py_ssize_t c0 = item / job->blocks % job->lane_groups * W;                    \
        const Py_ssize_t image = item / job->blocks / job->lane_groups;                     \
        const Py_ssize_t lanes = g->channels - c0 < W ? g->channels - c0 : W;               \
        const Py_ssize_t first_oh = block * job->block_rows;                                \
        const Py_ssize_t out_rows = g->out_h - first_oh < job->block_rows                   \
                                        ? g->out_h - first_oh : job->block_rows;            \
        const Py_ssize_t in_rows = (out_rows - 1) * g->stride_h +                           \
                                   (g->kernel_h - 1) * g->dilation_h + 1;                   \
        const Py_ssize_t columns = job->columns, pitch = columns * W;                       \
        const Py_ssize_t taps = g->kernel_h * g->kernel_w, plane = g->height * g->width;    \
        float *padded = scratch, *sums = scratch + in_rows * pitch;                         \
        const float *x = job->x + (image * g->channels + c0) * plane;                       \
        const Py_ssize_t x_lo = g->pad_w, x_hi = g->pad_w + g->width < columns              \
                                                     ? g->pad_w + g->width : columns;        \
        for (Py_ssize_t r = 0; r < in_rows; r++) {                                          \
            float *line = padded + r * pitch;                                               \
            Py_ssize_t y = first_oh * g->stride_h - g->pad_h + r;                           \
            memset(line, 0, (size_t)pitch * sizeof(float));                                 \
            if (y < 0 || y >= g->height)                                                    \
                continue;                                                                   \
            for (Py_ssize_t l = 0; l < lanes; l++) {                                        \
                const float *source = x + l * plane + y * g->width - g->pad_w;              \
                for (Py_ssize_t col = x_lo; col < x_hi; col++)                              \
                    line[col * W + l] = source[col];                                        \
            }                                                                               \
        }                                                                                   \
        V weights[MAX_TAPS], start = {0};                                                   \
        for (Py_ssize_t t = 0; t < taps; t++) {                                             \
            float lane[W] = {0};                                                            \
            for (Py_ssize_t l = 0; l < lanes; l++) lane[l] = job->w[(c0 + l) * taps + t];   \
            memcpy(&weights[t], lane, sizeof lane);                                         \
        }                                                                                   \
        if (job->bias != NULL) {                                                            \
            float lane[W] = {0};                                                            \
            for (Py_ssize_t l = 0; l < lanes; l++) lane[l] = job->bias[c0 + l];             \
            memcpy(&start, lane, sizeof lane);                                              \
        }                                                                                   \
        const Py_ssize_t step = g->stride_w * W, row_step = g->dilation_h * pitch;          \
        const Py_ssize_t tap_step = g->dilation_w * W;                                      \
        for (Py_ssize_t r = 0; r < out_rows; r++) {                                         \
            const float *row = padded + r * g->stride_h * pitch;                            \
            float *o = sums + r * g->out_w * W;                                             \
            Py_ssize_t ox = 0;                                                              \
            for (; ox + LANE_OUTPUTS <= g->out_w; ox += LANE_OUTPUTS) {                     \
                V a[LANE_OUTPUTS];                                                          \
                for (int i = 0; i < LANE_OUTPUTS; i++) a[i] = start;                        \
                for (Py_ssize_t ky = 0, t = 0; ky < g->kernel_h; ky++)                      \
                    for (Py_ssize_t kx = 0; kx < g->kernel_w; kx++, t++) {                  \
                        const float *p = row + ky * row_step + ox * step + kx * tap_step;   \
                        const V weight = weights[t];                                        \
                        for (int i = 0; i < LANE_OUTPUTS; i++)                              \
                            a[i] += weight * *(const V *)(p + i * step);                    \
                    }                                                                       \
                for (int i = 0; i < LANE_OUTPUTS; i++)                                      \
                    *(V *)(o + (ox + i) * W) = a[i];                                        \
            }                                                                               \
            for (; ox < g->out_w; ox++) {                                                   \
                V a = start;                                                                \
                for (Py_ssize_t ky = 0, t = 0; ky < g->kernel_h; ky++)                      \
                    for (Py_ssize_t kx = 0; kx < g->kernel_w; kx++, t++)                    \
                        a += weights[t] * *(const V *)(row + ky * row_step + ox * step +    \
                                                       kx * tap_step);                      \
                *(V *)(o + ox * W) = a;                                                     \
            }                                                                               \
        }                                                                                   \
        const Py_ssize_t count = out_rows * g->out_w;                                       \
        RowActivation apply = native_row_activation(job->activation);                       \
        if (apply != NULL)                                                                  \
            apply(sums, sums, count * W, job->alpha);                                       \
        float *out = job->out + ((image * g->channels + c0) * g->out_h + first_oh) *        \
                                    g->out_w;                                               \
        const Py_ssize_t out_plane = g->out_h * g->out_w;                                   \
        for (Py_ssize_t l = 0; l < lanes; l++)                                              \
            for (Py_ssize_t i = 0; i < count; i++)                                          \
                out[l * out_plane + i] = sums[i * W + l];                                   \
    }

DEFINE_LANE_DEPTHWISE(lane_depthwise_4, , tap_v4, 4)
#ifdef X86_KERNELS
DEFINE_LANE_DEPTHWISE(lane_depthwise_8, __attribute__((target("avx2,fma"))), tap_v8, 8)
DEFINE_LANE_DEPTHWISE(lane_depthwise_16, __attribute__((target("avx512f"))), tap_v16, 16)
#endif

typedef void (*LaneDepthwise)(const LaneConv *, Py_ssize_t, float *);

/* the lane kernel of the GEMM's ISA and its width */
static LaneDepthwise lane_depthwise_kernel(Py_ssize_t *lanes) {
#ifdef X86_KERNELS
    const char *isa = gemm_isa_name();
    if (strcmp(isa, "avx512") == 0) {
        *lanes = 16;
        return lane_depthwise_16;
    }
    if (strcmp(isa, "avx2") == 0) {
        *lanes = 8;
        return lane_depthwise_8;
    }
#endif
    *lanes = 4;
    return lane_depthwise_4;
}

typedef struct {
    LaneConv *job;
    LaneDepthwise kernel;
} LaneTask;

static void lane_depthwise_task(void *context, ptrdiff_t task) {
    LaneTask *t = context;
    LaneConv *job = t->job;
    float *scratch = pool_scratch(job->scratch_floats);
    if (scratch == NULL) {
        atomic_store(&job->failed, 1);
        return;
    }
    Py_ssize_t first = task * job->per_task;
    Py_ssize_t last = first + job->per_task < job->items ? first + job->per_task : job->items;
    for (Py_ssize_t item = first; item < last; item++)
        t->kernel(job, item, scratch);
}

/* scratch floats per item at most (its interleaved rows and sums: ~1 MB, in L2) */
#define LANE_SCRATCH_FLOATS 262144

/* the depthwise convolution by channel lanes; 0, or -1 when a task found no scratch */
static int lane_depthwise(const float *x, const float *w, const float *bias, float *out,
                          const ConvGeometry *g, int activation, float alpha) {
    Py_ssize_t lanes;
    LaneTask task = {.kernel = lane_depthwise_kernel(&lanes)};
    Py_ssize_t columns = (g->out_w - 1) * g->stride_w + (g->kernel_w - 1) * g->dilation_w + 1;
    /* a row block's scratch: its input rows, then its sums */
    Py_ssize_t row_floats = g->stride_h * columns * lanes + g->out_w * lanes;
    Py_ssize_t fixed = ((g->kernel_h - 1) * g->dilation_h + 1) * columns * lanes;
    Py_ssize_t block_rows = (LANE_SCRATCH_FLOATS - fixed) / row_floats;
    if (block_rows < 1) block_rows = 1;
    if (block_rows > g->out_h) block_rows = g->out_h;
    Py_ssize_t lane_groups = (g->channels + lanes - 1) / lanes;
    LaneConv job = {.x = x, .w = w, .bias = bias, .out = out, .g = g, .lanes = lanes,
                    .lane_groups = lane_groups, .block_rows = block_rows,
                    .blocks = (g->out_h + block_rows - 1) / block_rows, .columns = columns,
                    .activation = activation, .alpha = alpha};
    job.scratch_floats = fixed + block_rows * row_floats;
    job.items = g->batch * lane_groups * job.blocks;
    double work = (double)g->batch * (double)g->channels * (double)g->out_h *
                  (double)g->out_w * (double)(g->kernel_h * g->kernel_w);
    job.per_task = work < CONV_SERIAL_WORK ? job.items : 1;
    atomic_init(&job.failed, 0);
    task.job = &job;
    pool_run((job.items + job.per_task - 1) / job.per_task, lane_depthwise_task, &task);
    return atomic_load(&job.failed) ? -1 : 0;
}

/* -- the taps of a stacked product summed at their offsets ------------------------------- */
/* A dense stride-1 convolution with few output channels computes one product of every
 * tap's weights with the flat padded input, (taps * C_out, positions); each output is then
 * the sum over taps of that tap's rows read at the tap's offset. One pass, bias included,
 * straight into the output's rows (the padded layout's extra columns are never written). */
typedef struct {
    Py_ssize_t channels, channel_stride, rows, row_pitch, cols, out_plane, first_row, taps;
} ShiftedSums;

typedef struct {
    const float *source, *bias;
    float *out;
    const Py_ssize_t *offsets;
    const ShiftedSums *s;
    TapSums tap_sums;
    Py_ssize_t rows_per_task, tasks_per_channel;
} ShiftedJob;

/* one channel's block of rows */
static void shifted_sums_task(void *context, ptrdiff_t task) {
    const ShiftedJob *job = context;
    const ShiftedSums *s = job->s;
    float ones[MAX_TAPS];
    for (Py_ssize_t t = 0; t < s->taps; t++) ones[t] = 1.0f;
    Py_ssize_t c = task / job->tasks_per_channel;
    Py_ssize_t first = task % job->tasks_per_channel * job->rows_per_task;
    Py_ssize_t last = first + job->rows_per_task < s->rows ? first + job->rows_per_task
                                                           : s->rows;
    if (first < last)
        job->tap_sums(job->source + c * s->channel_stride + first * s->row_pitch, s->row_pitch,
                      job->offsets, ones, s->taps, job->bias ? job->bias[c] : 0.0f,
                      job->out + c * s->out_plane + (s->first_row + first) * s->cols, s->cols,
                      s->cols, last - first);
}

static void shifted_sums_loop(const float *source, float *out, const float *bias,
                              const Py_ssize_t *offsets, const ShiftedSums *s) {
    ShiftedJob job = {.source = source, .bias = bias, .out = out, .offsets = offsets, .s = s,
                      .tap_sums = tap_sums_kernel()};
    double row_work = (double)s->cols * (double)s->taps;
    double work = row_work * (double)s->rows * (double)s->channels;
    Py_ssize_t rows = (Py_ssize_t)(CONV_ITEM_WORK / row_work) + 1;
    job.rows_per_task = work < CONV_SERIAL_WORK ? s->rows : rows < s->rows ? rows : s->rows;
    job.tasks_per_channel = (s->rows + job.rows_per_task - 1) / job.rows_per_task;
    if (work < CONV_SERIAL_WORK) { /* one task: every channel on the caller */
        for (Py_ssize_t c = 0; c < s->channels; c++) shifted_sums_task(&job, c);
        return;
    }
    pool_run(s->channels * job.tasks_per_channel, shifted_sums_task, &job);
}

/* -- a transposed convolution whose stride equals its kernel: taps tile the output ------- */
/* out[n, c, i * KH + a, j * KW + b] = taps[c, a * KW + b, n, i, j] + bias[c]: each output
 * row written once, contiguously, from the KW tap rows it interleaves (numpy writes each
 * tap through a strided view instead). */
typedef struct {
    Py_ssize_t channels, kernel_h, kernel_w, batch, height, width;
} TileGeometry;

MULTIVERSIONED
static void tile_taps_loop(const float *taps, const float *bias, float *out,
                           const TileGeometry *g) {
    Py_ssize_t plane = g->height * g->width, tap_count = g->kernel_h * g->kernel_w;
    Py_ssize_t out_width = g->width * g->kernel_w;
    for (Py_ssize_t n = 0; n < g->batch; n++)
        for (Py_ssize_t c = 0; c < g->channels; c++) {
            float add = bias ? bias[c] : 0.0f;
            const float *channel = taps + c * tap_count * g->batch * plane + n * plane;
            float *o = out + (n * g->channels + c) * plane * tap_count;
            for (Py_ssize_t i = 0; i < g->height; i++)
                for (Py_ssize_t a = 0; a < g->kernel_h; a++) {
                    float *row = o + (i * g->kernel_h + a) * out_width;
                    const float *first = channel + (a * g->kernel_w) * g->batch * plane +
                                         i * g->width;
                    if (g->kernel_w == 2) {
                        const float *second = first + g->batch * plane;
                        for (Py_ssize_t j = 0; j < g->width; j++) {
                            row[2 * j] = first[j] + add;
                            row[2 * j + 1] = second[j] + add;
                        }
                        continue;
                    }
                    for (Py_ssize_t b = 0; b < g->kernel_w; b++) {
                        const float *source = first + b * g->batch * plane;
                        for (Py_ssize_t j = 0; j < g->width; j++)
                            row[j * g->kernel_w + b] = source[j] + add;
                    }
                }
        }
}

/* -- 2-d max pooling, NCHW: a window's positions outside the image count as -inf -------- */
typedef struct {
    const float *x;
    float *out;
    Py_ssize_t planes, height, width, kernel_h, kernel_w, stride_h, stride_w, pad_top,
        pad_left, out_h, out_w, per_task;
} MaxPool2d;

/* numpy.maximum's: a NaN on either side wins */
INLINE float pool_max(float a, float b) { return a >= b || a != a ? a : b; }

/* every output row of one plane: -inf, then the max with each tap's run of the input row
 * (the taps' column ranges computed once per tap, so the inner loops are plain) */
MULTIVERSIONED
static void max_pool_plane(const MaxPool2d *p, Py_ssize_t plane) {
    const float *in = p->x + plane * p->height * p->width;
    float *o = p->out + plane * p->out_h * p->out_w;
    for (Py_ssize_t oh = 0; oh < p->out_h; oh++) {
        float *row = o + oh * p->out_w;
        for (Py_ssize_t ow = 0; ow < p->out_w; ow++) row[ow] = -INFINITY;
        for (Py_ssize_t i = 0; i < p->kernel_h; i++) {
            Py_ssize_t ih = oh * p->stride_h - p->pad_top + i;
            if (ih < 0 || ih >= p->height) continue;
            const float *source = in + ih * p->width;
            for (Py_ssize_t j = 0; j < p->kernel_w; j++) {
                /* outputs ow whose column ow * stride + offset lies in [0, width) */
                Py_ssize_t offset = j - p->pad_left, sw = p->stride_w;
                Py_ssize_t lo = offset >= 0 ? 0 : (-offset + sw - 1) / sw;
                Py_ssize_t hi = p->width - offset > 0 ? (p->width - offset + sw - 1) / sw : 0;
                if (hi > p->out_w) hi = p->out_w;
                if (sw == 1)
                    for (Py_ssize_t ow = lo; ow < hi; ow++)
                        row[ow] = pool_max(row[ow], source[ow + offset]);
                else
                    for (Py_ssize_t ow = lo; ow < hi; ow++)
                        row[ow] = pool_max(row[ow], source[ow * sw + offset]);
            }
        }
    }
}

static void max_pool_task(void *context, ptrdiff_t task) {
    const MaxPool2d *p = context;
    Py_ssize_t first = task * p->per_task;
    Py_ssize_t last = first + p->per_task < p->planes ? first + p->per_task : p->planes;
    for (Py_ssize_t plane = first; plane < last; plane++) max_pool_plane(p, plane);
}

/* -- sigmoid and tanh -------------------------------------------------------------------- */
/* 1 / (1 + exp(-x)): exp's ~2 ulp carry over; -x past EXP_HI gives 1 / inf = 0, NaN stays */
INLINE float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

/* tanh(x) as a [13/6] rational in x (Eigen's float tanh), clamped where Eigen clamps:
 * within 5 ulp (measured against float64 over float32's range; the largest just inside
 * the clamp, where tanh is 1 - 2.7e-7); NaN stays NaN. */
#define TANH_CLAMP 7.90531110763549805f
#define TANH_TINY_SQUARE 1.6e-7f /* |x| < 4e-4: x itself is within half an ulp */
INLINE float fast_tanh(float x) {
    float v = x > TANH_CLAMP ? TANH_CLAMP : x;
    v = v < -TANH_CLAMP ? -TANH_CLAMP : v;
    float v2 = v * v;
    float p = -2.76076847742355e-16f;
    p = p * v2 + 2.00018790482477e-13f;
    p = p * v2 - 8.60467152213735e-11f;
    p = p * v2 + 5.12229709037114e-08f;
    p = p * v2 + 1.48572235717979e-05f;
    p = p * v2 + 6.37261928875436e-04f;
    p = p * v2 + 4.89352455891786e-03f;
    p = p * v;
    float q = 1.19825839466702e-06f;
    q = q * v2 + 1.18534705686654e-04f;
    q = q * v2 + 2.26843463243900e-03f;
    q = q * v2 + 4.89352518554385e-03f;
    float y = p / q;
    y = v * v < TANH_TINY_SQUARE ? x : y; /* tanh(x) = x (1 - x^2 / 3 ...): no subnormal p */
    return x != x ? x : y;
}

/* -- standalone Tanh, Exp and Erf: the same polynomials, one pass into out --------------- */
MULTIVERSIONED
static void tanh_loop(const float *x, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = fast_tanh(x[i]);
}

MULTIVERSIONED
static void exp_loop(const float *x, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = fast_exp(x[i]);
}

/* erf(x): for |x| < ERF_SERIES_LIMIT its Maclaurin series, odd in x (2 / sqrt(pi) folded
 * into the coefficients; the terms past x^15 add less than 2^-28 relative); above,
 * 1 - erfc(|x|) by the erfc of gelu_erf (Numerical Recipes' erfcc, fractional error
 * < 1.2e-7), where the subtraction loses nothing (erfc < 0.48), signed as x. Within 3 ulp
 * (measured against float64); NaN stays NaN, +-inf -> +-1. */
#define ERF_SERIES_LIMIT 0.5f
INLINE float fast_erf(float x) {
    float a = x < 0.0f ? -x : x;
    float x2 = x * x;
    float s = -1.4925650358406250e-5f; /* c_n = 2 / sqrt(pi) (-1)^n / (n! (2n + 1)) */
    s = s * x2 + 1.2055332981789664e-4f;
    s = s * x2 - 8.5483270234508523e-4f;
    s = s * x2 + 5.2239776254421879e-3f;
    s = s * x2 - 2.6866170645131252e-2f;
    s = s * x2 + 1.1283791670955126e-1f;
    s = s * x2 - 3.7612638903183754e-1f;
    s = s * x2 + 1.1283791670955126e+0f;
    float series = x * s;
    float b = a < NORMAL_TAIL_CLAMP ? a : NORMAL_TAIL_CLAMP;
    float t = 1.0f / (1.0f + 0.5f * b);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    float tail = 1.0f - t * fast_exp(p - b * b);
    tail = x < 0.0f ? -tail : tail;
    float y = a < ERF_SERIES_LIMIT ? series : tail;
    return x != x ? x : y;
}

MULTIVERSIONED
static void erf_loop(const float *x, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = fast_erf(x[i]);
}

/* -- Sigmoid and SiLU: exp of -|x| only (no overflow), 1 / (1 + e) or e / (1 + e) ------ */
INLINE float stable_sigmoid(float x) {
    float e = fast_exp(x < 0.0f ? x : -x); /* NaN stays NaN */
    float r = 1.0f / (1.0f + e);
    return x < 0.0f ? e * r : r;
}

MULTIVERSIONED
static void sigmoid_loop(const float *x, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = stable_sigmoid(x[i]);
}

MULTIVERSIONED
static void silu_loop(const float *x, float *out, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = x[i] * stable_sigmoid(x[i]);
}

/* -- LeakyRelu: x where x > 0, else slope * x (NaN stays NaN) ------------------------------ */
MULTIVERSIONED
static void leaky_relu_loop(const float *x, float *out, Py_ssize_t n, float slope) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = x[i] > 0.0f ? x[i] : x[i] * slope;
}

/* -- Clamp: min(max(x, low), high) with NaN staying NaN (both comparisons are false for
 * it), as np.minimum(np.maximum(x, low), high); low > high gives high. NaN bounds are the
 * caller's to refuse. --------------------------------------------------------------------- */
MULTIVERSIONED
static void clamp_loop(const float *x, float *out, Py_ssize_t n, float low, float high) {
    for (Py_ssize_t i = 0; i < n; i++) {
        float v = x[i] < low ? low : x[i];
        out[i] = v > high ? high : v;
    }
}

/* -- the activations a GEMM or a convolution applies to its finished rows ----------------- */
/* max(x, 0): NaN stays NaN (x < 0 is false for it), -0 stays -0, as np.maximum(x, 0) */
MULTIVERSIONED
static void row_relu(const float *in, float *out, ptrdiff_t n, float alpha) {
    (void)alpha;
    for (ptrdiff_t i = 0; i < n; i++) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}
static void row_hardswish(const float *in, float *out, ptrdiff_t n, float alpha) {
    (void)alpha;
    hardswish_loop(in, out, n);
}
static void row_sigmoid(const float *in, float *out, ptrdiff_t n, float alpha) {
    (void)alpha;
    sigmoid_loop(in, out, n);
}
static void row_silu(const float *in, float *out, ptrdiff_t n, float alpha) {
    (void)alpha;
    silu_loop(in, out, n);
}
static void row_leaky_relu(const float *in, float *out, ptrdiff_t n, float alpha) {
    leaky_relu_loop(in, out, n, alpha);
}
static void row_gelu_erf(const float *in, float *out, ptrdiff_t n, float alpha) {
    (void)alpha;
    gelu_erf_loop(in, out, n);
}

RowActivation native_row_activation(int code) {
    switch (code) {
    case GEMM_RELU: return row_relu;
    case GEMM_HARDSWISH: return row_hardswish;
    case GEMM_SIGMOID: return row_sigmoid;
    case GEMM_SILU: return row_silu;
    case GEMM_LEAKY_RELU: return row_leaky_relu;
    case GEMM_GELU_ERF: return row_gelu_erf;
    default: return NULL; /* none */
    }
}

/* -- LSTM and GRU over a whole sequence (PyTorch's gate orders: LSTM i, f, g, o; GRU r, z,
 * n) ----------------------------------------------------------------------------------------- */
typedef struct {
    const float *projected;   /* (T, B, G*H): x_t @ W^T plus the input-side biases */
    const float *recurrent;   /* R (G*H, H), or R^T (H, G*H) when transposed */
    const float *hidden_bias; /* G*H added to h @ R^T (GRU's b_hh), or NULL */
    float *h, *c;             /* (B, H): the initial state in, the final state out (c: LSTM) */
    float *y;                 /* (T, B, y_row): h_t at column y_offset of each row */
    float *gates;             /* (B, G*H) scratch: h @ R^T (+ hidden_bias) per step */
    Py_ssize_t steps, batch, hidden, gate_count, y_row, y_offset;
    int reverse, transposed;
} Recurrence;

/* the dot product of two rows in LANES partial sums, so that it vectorises in order */
INLINE float row_dot(const float *a, const float *b, Py_ssize_t length) {
    float lane[LANES] = {0};
    Py_ssize_t body = length - length % LANES, i;
    for (i = 0; i < body; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += a[i + j] * b[i + j];
    float total = 0.0f;
    for (int j = 0; j < LANES; j++) total += lane[j];
    for (; i < length; i++) total += a[i] * b[i];
    return total;
}

/* gates[b] = start + h[b] @ R^T, start the step's projection (LSTM) or the hidden bias (GRU,
 * or 0). Given R^T: rows of R^T scaled by h[b, k] (the inner loop runs over G*H contiguous
 * columns, no reduction: full vectors); given R (a short sequence, where transposing would
 * cost more than it saves): one dot product per gate row. */
MULTIVERSIONED
static void recurrent_gates(const Recurrence *a, Py_ssize_t t, int add_projection) {
    const Py_ssize_t hidden = a->hidden, width = a->gate_count * hidden;
    for (Py_ssize_t b = 0; b < a->batch; b++) {
        float *g = a->gates + b * width;
        const float *start = add_projection ? a->projected + (t * a->batch + b) * width
                                            : a->hidden_bias;
        const float *h = a->h + b * hidden;
        if (start != NULL)
            memcpy(g, start, (size_t)width * sizeof *g);
        else
            memset(g, 0, (size_t)width * sizeof *g);
        if (!a->transposed) {
            for (Py_ssize_t j = 0; j < width; j++)
                g[j] += row_dot(h, a->recurrent + j * hidden, hidden);
            continue;
        }
        Py_ssize_t k = 0;
        for (; k + 4 <= hidden; k += 4) { /* four rows per pass: g[j] stays in a register,
                                           * its sum in the same order as row by row */
            const float h0 = h[k], h1 = h[k + 1], h2 = h[k + 2], h3 = h[k + 3];
            const float *r0 = a->recurrent + k * width, *r1 = r0 + width;
            const float *r2 = r1 + width, *r3 = r2 + width;
            for (Py_ssize_t j = 0; j < width; j++) {
                float sum = g[j];
                sum += h0 * r0[j];
                sum += h1 * r1[j];
                sum += h2 * r2[j];
                sum += h3 * r3[j];
                g[j] = sum;
            }
        }
        for (; k < hidden; k++) {
            const float hk = h[k];
            const float *r = a->recurrent + k * width;
            for (Py_ssize_t j = 0; j < width; j++) g[j] += hk * r[j];
        }
    }
}

MULTIVERSIONED
static void lstm_sequence_loop(const Recurrence *a) {
    const Py_ssize_t hidden = a->hidden, width = 4 * hidden;
    for (Py_ssize_t s = 0; s < a->steps; s++) {
        Py_ssize_t t = a->reverse ? a->steps - 1 - s : s;
        recurrent_gates(a, t, 1);
        for (Py_ssize_t b = 0; b < a->batch; b++) {
            const float *g = a->gates + b * width;
            float *h = a->h + b * hidden, *c = a->c + b * hidden;
            float *y = a->y + (t * a->batch + b) * a->y_row + a->y_offset;
            for (Py_ssize_t j = 0; j < hidden; j++) {
                float input = fast_sigmoid(g[j]), forget = fast_sigmoid(g[hidden + j]);
                float cell = fast_tanh(g[2 * hidden + j]), output = fast_sigmoid(g[3 * hidden + j]);
                float state = forget * c[j] + input * cell;
                c[j] = state;
                h[j] = output * fast_tanh(state);
                y[j] = h[j];
            }
        }
    }
}

/* r = s(x_r + h_r), z = s(x_z + h_z), n = tanh(x_n + r * h_n), h = (1 - z) n + z h, with
 * h_* = h @ R_*^T + b_h* (PyTorch's GRU, ONNX's linear_before_reset = 1) */
MULTIVERSIONED
static void gru_sequence_loop(const Recurrence *a) {
    const Py_ssize_t hidden = a->hidden, width = 3 * hidden;
    for (Py_ssize_t s = 0; s < a->steps; s++) {
        Py_ssize_t t = a->reverse ? a->steps - 1 - s : s;
        recurrent_gates(a, t, 0);
        for (Py_ssize_t b = 0; b < a->batch; b++) {
            const float *g = a->gates + b * width;
            const float *p = a->projected + (t * a->batch + b) * width;
            float *h = a->h + b * hidden;
            float *y = a->y + (t * a->batch + b) * a->y_row + a->y_offset;
            for (Py_ssize_t j = 0; j < hidden; j++) {
                float reset = fast_sigmoid(p[j] + g[j]);
                float update = fast_sigmoid(p[hidden + j] + g[hidden + j]);
                float candidate = fast_tanh(p[2 * hidden + j] + reset * g[2 * hidden + j]);
                h[j] = (1.0f - update) * candidate + update * h[j];
                y[j] = h[j];
            }
        }
    }
}

/* -- onnxruntime's DynamicQuantizeLSTM recurrence, to the bit ------------------------------
 * openacl.model.host_contrib's design note says what is reproduced; this is its common case
 * (default activations, no peepholes, full sequences, one hidden-state slice). Products and
 * sums are rounded as onnxruntime's kernels round them: no multiply-add is fused
 * (fp-contract=off) except in MLAS's polynomials, which use fmaf as its FMA3 kernels do. */
#define MLAS_FUNCTIONS __attribute__((optimize("fp-contract=off")))

MLAS_FUNCTIONS INLINE float mlas_logistic(float x) {
    x = x < -18.0f ? -18.0f : x;
    x = x > 18.0f ? 18.0f : x;
    float x2 = x * x;
    float p = fmaf(x2, 4.37031012579801e-11f, 1.15627324459942e-07f);
    p = fmaf(p, x2, 6.08574864600143e-05f);
    p = fmaf(p, x2, 8.51377133304701e-03f);
    p = fmaf(p, x2, 2.48287947061529e-01f);
    p = p * x;
    float q = fmaf(x2, 6.10247389755681e-13f, 5.76102136993427e-09f);
    q = fmaf(q, x2, 6.29106785017040e-06f);
    q = fmaf(q, x2, 1.70198817374094e-03f);
    q = fmaf(q, x2, 1.16817656904453e-01f);
    q = fmaf(q, x2, 9.93151921023180e-01f);
    float y = p / q + 0.5f;
    y = y < 0.0f ? 0.0f : y;
    return y > 1.0f ? 1.0f : y;
}

MLAS_FUNCTIONS INLINE float mlas_tanh(float x) {
    x = x < -9.0f ? -9.0f : x;
    x = x > 9.0f ? 9.0f : x;
    float x2 = x * x;
    float p = fmaf(x2, -2.76076847742355e-16f, 2.00018790482477e-13f);
    p = fmaf(p, x2, -8.60467152213735e-11f);
    p = fmaf(p, x2, 5.12229709037114e-08f);
    p = fmaf(p, x2, 1.48572235717979e-05f);
    p = fmaf(p, x2, 6.37261928875436e-04f);
    p = fmaf(p, x2, 4.89352455891786e-03f);
    p = p * x;
    float q = fmaf(x2, 1.19825839466702e-06f, 1.18534705686654e-04f);
    q = fmaf(q, x2, 2.26843463243900e-03f);
    q = fmaf(q, x2, 4.89352518554385e-03f);
    return p / q;
}

/* the deep-CPU kernel's clip_add_bias / clip_ignore_bias, comparisons kept */
MLAS_FUNCTIONS INLINE float gate_clip(float x, const float *bias, Py_ssize_t j, float clip) {
    if (bias == NULL) return x > clip ? clip : (x < -clip ? -clip : x);
    x = x + bias[j];
    x = x < clip ? x : clip;
    return -clip < x ? x : -clip;
}

/* sums[j] = sum over k of q[k] * R[k, j], exactly, from R's interleaved row pairs (rows of
 * `width` pairs): int16 products summed in pairs into int32 (vpmaddwd); |q|, |R| <= 255 so
 * nothing overflows below K = 33000 (the bound onnxruntime's int32 accumulator has too).
 * `Pair` is int16_t (any values) or int8_t (a matrix whose values fit: half the bytes to
 * stream, widened in registers). Row pair by row pair: the matrix streams through once, in
 * order; the sums stay in L1. */
#define PAIR_PRODUCTS_SCALAR(name, Pair)                                                      \
    static void name(const int32_t *q, const void *matrix, int32_t *sums, Py_ssize_t hidden,  \
                     Py_ssize_t width, Py_ssize_t first, Py_ssize_t last) {                   \
        const Pair *pairs = matrix;                                                           \
        memset(sums + first, 0, (size_t)(last - first) * sizeof *sums);                       \
        for (Py_ssize_t p = 0; p < (hidden + 1) / 2; p++) {                                   \
            int32_t q0 = q[2 * p], q1 = 2 * p + 1 < hidden ? q[2 * p + 1] : 0;               \
            const Pair *row = pairs + 2 * p * width;                                          \
            for (Py_ssize_t j = first; j < last; j++)                                         \
                sums[j] += q0 * row[2 * j] + q1 * row[2 * j + 1];                             \
        }                                                                                     \
    }
PAIR_PRODUCTS_SCALAR(pair_products_scalar, int16_t)
PAIR_PRODUCTS_SCALAR(narrow_pair_products_scalar, int8_t)

#ifdef X86_KERNELS
INLINE int32_t packed_pair(const int32_t *q, Py_ssize_t p, Py_ssize_t hidden) {
    uint16_t low = (uint16_t)(int16_t)q[2 * p];
    uint16_t high = 2 * p + 1 < hidden ? (uint16_t)(int16_t)q[2 * p + 1] : 0;
    return (int32_t)((uint32_t)low | (uint32_t)high << 16);
}

/* LOAD(row, j): the 2 * LANES int16 of columns j .. j + LANES - 1 of a row pair */
#define PAIR_PRODUCTS_SIMD(name, Pair, isa, Int, LANES, load, store, add, madd, broadcast,   \
                           LOAD)                                                             \
    __attribute__((target(isa))) static void name(const int32_t *q, const void *matrix,      \
                                                  int32_t *sums, Py_ssize_t hidden,          \
                                                  Py_ssize_t width, Py_ssize_t first,        \
                                                  Py_ssize_t last) {                         \
        const Pair *pairs = matrix;                                                           \
        const Py_ssize_t body = last - (last - first) % LANES, count = (hidden + 1) / 2;      \
        memset(sums + first, 0, (size_t)(last - first) * sizeof *sums);                       \
        Py_ssize_t p = 0;                                                                     \
        for (; p + 4 <= count; p += 4) { /* four row pairs per pass: sums in registers */    \
            const Int q0 = broadcast(packed_pair(q, p, hidden));                              \
            const Int q1 = broadcast(packed_pair(q, p + 1, hidden));                          \
            const Int q2 = broadcast(packed_pair(q, p + 2, hidden));                          \
            const Int q3 = broadcast(packed_pair(q, p + 3, hidden));                          \
            const Pair *r0 = pairs + 2 * p * width, *r1 = r0 + 2 * width;                     \
            const Pair *r2 = r1 + 2 * width, *r3 = r2 + 2 * width;                            \
            for (Py_ssize_t j = first; j < body; j += LANES) {                                \
                Int part = add(madd(LOAD(r0, j), q0), madd(LOAD(r1, j), q1));                 \
                part = add(part, add(madd(LOAD(r2, j), q2), madd(LOAD(r3, j), q3)));          \
                store((void *)(sums + j), add(load((const void *)(sums + j)), part));         \
            }                                                                                 \
        }                                                                                     \
        for (; p < count; p++) {                                                              \
            const Int qq = broadcast(packed_pair(q, p, hidden));                              \
            const Pair *row = pairs + 2 * p * width;                                          \
            for (Py_ssize_t j = first; j < body; j += LANES)                                  \
                store((void *)(sums + j), add(load((const void *)(sums + j)),                 \
                                              madd(LOAD(row, j), qq)));                       \
        }                                                                                     \
        for (Py_ssize_t j = body; j < last; j++) /* the columns past the last vector */       \
            for (Py_ssize_t k = 0; k < count; k++) {                                          \
                int32_t a0 = q[2 * k], a1 = 2 * k + 1 < hidden ? q[2 * k + 1] : 0;           \
                const Pair *row = pairs + 2 * k * width;                                      \
                sums[j] += a0 * row[2 * j] + a1 * row[2 * j + 1];                             \
            }                                                                                 \
    }
#define LOAD_WIDE_512(row, j) _mm512_loadu_si512((const void *)((row) + 2 * (j)))
#define LOAD_NARROW_512(row, j) \
    _mm512_cvtepi8_epi16(_mm256_loadu_si256((const void *)((row) + 2 * (j))))
#define LOAD_WIDE_256(row, j) _mm256_loadu_si256((const void *)((row) + 2 * (j)))
#define LOAD_NARROW_256(row, j) \
    _mm256_cvtepi8_epi16(_mm_loadu_si128((const void *)((row) + 2 * (j))))
PAIR_PRODUCTS_SIMD(pair_products_avx512, int16_t, "avx512f,avx512bw", __m512i, 16,
                   _mm512_loadu_si512, _mm512_storeu_si512, _mm512_add_epi32,
                   _mm512_madd_epi16, _mm512_set1_epi32, LOAD_WIDE_512)
PAIR_PRODUCTS_SIMD(narrow_pair_products_avx512, int8_t, "avx512f,avx512bw", __m512i, 16,
                   _mm512_loadu_si512, _mm512_storeu_si512, _mm512_add_epi32,
                   _mm512_madd_epi16, _mm512_set1_epi32, LOAD_NARROW_512)
PAIR_PRODUCTS_SIMD(pair_products_avx2, int16_t, "avx2", __m256i, 8, _mm256_loadu_si256,
                   _mm256_storeu_si256, _mm256_add_epi32, _mm256_madd_epi16,
                   _mm256_set1_epi32, LOAD_WIDE_256)
PAIR_PRODUCTS_SIMD(narrow_pair_products_avx2, int8_t, "avx2", __m256i, 8, _mm256_loadu_si256,
                   _mm256_storeu_si256, _mm256_add_epi32, _mm256_madd_epi16,
                   _mm256_set1_epi32, LOAD_NARROW_256)
#endif

/* sums[first:last) of the products (columns of R; the rest of sums untouched) */
typedef void (*PairProducts)(const int32_t *, const void *, int32_t *, Py_ssize_t, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t);

/* the best pair-product kernel for this CPU and the matrix's element type */
static PairProducts pair_products_for(int narrow) {
#ifdef X86_KERNELS
    if (__builtin_cpu_supports("avx512bw"))
        return narrow ? narrow_pair_products_avx512 : pair_products_avx512;
    if (__builtin_cpu_supports("avx2"))
        return narrow ? narrow_pair_products_avx2 : pair_products_avx2;
#endif
    return narrow ? narrow_pair_products_scalar : pair_products_scalar;
}

/* R's columns come in blocks of DQ_UNITS hidden units, each block holding its units'
 * columns of gate i, then o, f and c (the last block: the units left); so the columns of
 * any run of whole blocks are contiguous, and within a block each gate's are too. */
#define DQ_UNITS 16

/* The same sums from R's quads with VNNI (vpdpbusd: four u8 x s8 products summed into each
 * int32 lane, exactly): the state as unsigned bytes q + z against R as int8, then
 * z * (the column's sum) taken off, so sum q' * R = sum (q + z) * R - z * sum R, exactly
 * (|sums| < 2^31 for H < 65000). A unit block's 64 columns stay in four registers (two
 * chains each) while its quads stream once, contiguously. */
#define QUAD_COLUMNS (4 * DQ_UNITS)
#define QUAD_BYTES (4 * QUAD_COLUMNS) /* one row quad of a block */

typedef void (*QuadProducts)(const uint8_t *, const int8_t *, const int32_t *, int32_t,
                             int32_t *, Py_ssize_t, Py_ssize_t, Py_ssize_t);

#ifdef X86_KERNELS
INLINE int32_t quad_at(const uint8_t *q, Py_ssize_t p) {
    int32_t word;
    memcpy(&word, q + 4 * p, sizeof word);
    return word;
}

__attribute__((target("avx512f,avx512bw,avx512vnni")))
static void quad_products_vnni(const uint8_t *q, const int8_t *quads,
                               const int32_t *column_sums, int32_t zero, int32_t *sums,
                               Py_ssize_t hidden, Py_ssize_t first, Py_ssize_t last) {
    const Py_ssize_t quad_rows = (hidden + 3) / 4;
    const __m512i z = _mm512_set1_epi32(zero);
    for (Py_ssize_t block = first; block < last; block += DQ_UNITS) {
        const int8_t *r = quads + block / DQ_UNITS * quad_rows * QUAD_BYTES;
        const int32_t *column_sum = column_sums + block / DQ_UNITS * QUAD_COLUMNS;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        __m512i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        Py_ssize_t p = 0;
        for (; p + 2 <= quad_rows; p += 2, r += 2 * QUAD_BYTES) {
            const __m512i q0 = _mm512_set1_epi32(quad_at(q, p));
            const __m512i q1 = _mm512_set1_epi32(quad_at(q, p + 1));
            a0 = _mm512_dpbusd_epi32(a0, q0, _mm512_loadu_si512((const void *)r));
            a1 = _mm512_dpbusd_epi32(a1, q0, _mm512_loadu_si512((const void *)(r + 64)));
            a2 = _mm512_dpbusd_epi32(a2, q0, _mm512_loadu_si512((const void *)(r + 128)));
            a3 = _mm512_dpbusd_epi32(a3, q0, _mm512_loadu_si512((const void *)(r + 192)));
            b0 = _mm512_dpbusd_epi32(b0, q1, _mm512_loadu_si512((const void *)(r + 256)));
            b1 = _mm512_dpbusd_epi32(b1, q1, _mm512_loadu_si512((const void *)(r + 320)));
            b2 = _mm512_dpbusd_epi32(b2, q1, _mm512_loadu_si512((const void *)(r + 384)));
            b3 = _mm512_dpbusd_epi32(b3, q1, _mm512_loadu_si512((const void *)(r + 448)));
        }
        if (p < quad_rows) {
            const __m512i q0 = _mm512_set1_epi32(quad_at(q, p));
            a0 = _mm512_dpbusd_epi32(a0, q0, _mm512_loadu_si512((const void *)r));
            a1 = _mm512_dpbusd_epi32(a1, q0, _mm512_loadu_si512((const void *)(r + 64)));
            a2 = _mm512_dpbusd_epi32(a2, q0, _mm512_loadu_si512((const void *)(r + 128)));
            a3 = _mm512_dpbusd_epi32(a3, q0, _mm512_loadu_si512((const void *)(r + 192)));
        }
        int32_t result[QUAD_COLUMNS];
        const __m512i parts[4] = {_mm512_add_epi32(a0, b0), _mm512_add_epi32(a1, b1),
                                  _mm512_add_epi32(a2, b2), _mm512_add_epi32(a3, b3)};
        for (int i = 0; i < 4; i++) {
            __m512i correction = _mm512_mullo_epi32(
                z, _mm512_loadu_si512((const void *)(column_sum + 16 * i)));
            _mm512_storeu_si512((void *)(result + 16 * i),
                                _mm512_sub_epi32(parts[i], correction));
        }
        Py_ssize_t units = hidden - block < DQ_UNITS ? hidden - block : DQ_UNITS;
        memcpy(sums + 4 * block, result, (size_t)(4 * units) * sizeof *sums);
    }
}
#endif

/* out (M, N) float32 = (a (M, K) u8 rows, each padded to 4 * ceil(K / 4) with zeros) @ B
 * minus a_zero * B's column sums, exactly in int32, then converted (rounded once, as MLAS's
 * int32 -> float conversion): B (K, N) int8 as column blocks of QUAD_COLUMNS, each
 * (ceil(K / 4), QUAD_COLUMNS, 4) (zero columns after N), its column sums per block. Tasks
 * take column blocks; each block's quads stream once per four rows held in 16 registers. */
typedef struct {
    const uint8_t *a;
    const int8_t *quads;
    const int32_t *column_sums;
    float *out;
    Py_ssize_t rows, quad_rows, columns, blocks_per_task;
    int32_t a_zero;
} QuadGemm;

#ifdef X86_KERNELS
__attribute__((target("avx512f,avx512bw,avx512vnni")))
static void quad_gemm_block(const QuadGemm *job, Py_ssize_t block) {
    const Py_ssize_t quad_rows = job->quad_rows, pitch = 4 * quad_rows;
    const int8_t *panel = job->quads + block * quad_rows * QUAD_BYTES;
    const int32_t *column_sum = job->column_sums + block * QUAD_COLUMNS;
    const Py_ssize_t first = block * QUAD_COLUMNS;
    const Py_ssize_t width = job->columns - first < QUAD_COLUMNS ? job->columns - first
                                                                  : QUAD_COLUMNS;
    const __m512i z = _mm512_set1_epi32(job->a_zero);
    __m512i correction[4];
    for (int j = 0; j < 4; j++)
        correction[j] = _mm512_mullo_epi32(
            z, _mm512_loadu_si512((const void *)(column_sum + 16 * j)));
    for (Py_ssize_t m = 0; m < job->rows; m += 4) {
        const Py_ssize_t count = job->rows - m < 4 ? job->rows - m : 4;
        __m512i acc[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_si512();
        const uint8_t *rows[4];
        for (int i = 0; i < 4; i++) /* a missing row repeats the last (not stored) */
            rows[i] = job->a + (m + (i < count ? i : count - 1)) * pitch;
        const int8_t *r = panel;
        for (Py_ssize_t p = 0; p < quad_rows; p++, r += QUAD_BYTES) {
            const __m512i b0 = _mm512_loadu_si512((const void *)r);
            const __m512i b1 = _mm512_loadu_si512((const void *)(r + 64));
            const __m512i b2 = _mm512_loadu_si512((const void *)(r + 128));
            const __m512i b3 = _mm512_loadu_si512((const void *)(r + 192));
            for (int i = 0; i < 4; i++) {
                const __m512i q = _mm512_set1_epi32(quad_at(rows[i], p));
                acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], q, b0);
                acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], q, b1);
                acc[i][2] = _mm512_dpbusd_epi32(acc[i][2], q, b2);
                acc[i][3] = _mm512_dpbusd_epi32(acc[i][3], q, b3);
            }
        }
        for (Py_ssize_t i = 0; i < count; i++) {
            float *out = job->out + (m + i) * job->columns + first;
            for (int j = 0; j < 4 && 16 * j < width; j++) {
                __m512 values = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][j], correction[j]));
                Py_ssize_t lanes = width - 16 * j < 16 ? width - 16 * j : 16;
                _mm512_mask_storeu_ps(out + 16 * j, (__mmask16)((1u << lanes) - 1u), values);
            }
        }
    }
}
#endif

static void quad_gemm_task(void *context, ptrdiff_t task) {
#ifdef X86_KERNELS
    const QuadGemm *job = context;
    Py_ssize_t blocks = (job->columns + QUAD_COLUMNS - 1) / QUAD_COLUMNS;
    Py_ssize_t first = task * job->blocks_per_task;
    Py_ssize_t last = first + job->blocks_per_task < blocks ? first + job->blocks_per_task
                                                            : blocks;
    for (Py_ssize_t block = first; block < last; block++)
        quad_gemm_block(job, block);
#else
    (void)context;
    (void)task;
#endif
}

/* a product this small runs on the caller (multiply-adds) */
#define QUAD_GEMM_SERIAL_WORK 262144

static void quad_gemm(QuadGemm *job) {
    Py_ssize_t blocks = (job->columns + QUAD_COLUMNS - 1) / QUAD_COLUMNS;
    double work = (double)job->rows * (double)job->quad_rows * 4.0 * (double)job->columns;
    Py_ssize_t tasks = work < QUAD_GEMM_SERIAL_WORK || pool_threads() <= 1
                     ? 1 : 4 * (Py_ssize_t)pool_threads();
    if (tasks > blocks) tasks = blocks;
    job->blocks_per_task = (blocks + tasks - 1) / tasks;
    tasks = (blocks + job->blocks_per_task - 1) / job->blocks_per_task;
    pool_run(tasks, quad_gemm_task, job);
}

/* the VNNI kernel where this CPU has it, else NULL (the pairs' kernels then) */
static QuadProducts quad_products_for(void) {
#ifdef X86_KERNELS
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw"))
        return quad_products_vnni;
#endif
    return NULL;
}

typedef struct {
    const float *gates_x;     /* (T, B, 4H): the input projection, in processing order */
    const int16_t *pairs;     /* (ceil(H / 2), 4H, 2): R with its zero point taken, rows k
                               * and k + 1 interleaved (a zero row pads an odd H), or NULL */
    const int8_t *narrow;     /* the same as int8 (every value fits), or NULL */
    const float *r_scale;     /* 1 or 4H values */
    const float *bias;        /* 4H (Wb + Rb, ONNX's i, o, f, c) or NULL */
    float *h, *c, *y;         /* (B, H), (B, H), (T, B, H) or NULL */
    int32_t *quantized;       /* (B, H) scratch */
    int32_t *sums;            /* (B, 4H) scratch */
    Py_ssize_t steps, batch, hidden, scales;
    float clip;
    int reverse;
    /* the VNNI form of R, or NULL: blocks of DQ_UNITS units, each (ceil(H / 4), 64, 4) int8
     * (its 4 * units columns in the pairs' order, zero columns after), and per block the
     * 64 column sums; `unsigned_state` (B, 4 * ceil(H / 4)) scratch, zero past H */
    const int8_t *quads;
    const int32_t *column_sums;
    uint8_t *unsigned_state;
} DqLstm;

/* GetQuantizationParameter<uint8_t> and MlasQuantizeLinear over the B x H state */
MLAS_FUNCTIONS static void quantize_state(const float *h, Py_ssize_t count, int32_t *out,
                                          float *scale_out, int32_t *zero_out) {
    float low = 0.0f, high = 0.0f;
    for (Py_ssize_t i = 0; i < count; i++) {
        low = h[i] < low ? h[i] : low;
        high = h[i] > high ? h[i] : high;
    }
    float scale = high == low ? 1.0f : (high - low) / 255.0f;
    float zero = 0.0f - low / scale;
    zero = zero < 0.0f ? 0.0f : (zero > 255.0f ? 255.0f : zero);
    int32_t z = (int32_t)rintf(zero);
    for (Py_ssize_t i = 0; i < count; i++) {
        float v = rintf(h[i] / scale);
        v = v < (float)-z ? (float)-z : (v > (float)(255 - z) ? (float)(255 - z) : v);
        out[i] = (int32_t)v; /* the value minus its zero point */
    }
    *scale_out = scale;
    *zero_out = z;
}


/* The gates, cell and hidden state of units [block, block + units) of one batch row from
 * their recurrent sums (gate g's at gate_sums[g * units + u]), in stages over the block's
 * units held in arrays, so each stage is one loop the compiler turns into vectors (the
 * same operations, in the same order, as one unit at a time: the results are the same
 * bits). */
MLAS_FUNCTIONS INLINE void dq_lstm_gates(const DqLstm *a, const float *restrict gx,
                                         const int32_t *restrict gate_sums, float h_scale,
                                         int per_column, Py_ssize_t block, Py_ssize_t units,
                                         float *restrict h, float *restrict c) {
    const Py_ssize_t hidden = a->hidden;
    const float clip = a->clip;
    float gates[4][DQ_UNITS];
    for (int g = 0; g < 4; g++) {
        const Py_ssize_t column0 = g * hidden + block;
        const float *restrict x = gx + column0;
        const int32_t *restrict sum = gate_sums + g * units;
        if (per_column) {
            const float *restrict scale = a->r_scale + column0;
            for (Py_ssize_t u = 0; u < units; u++)
                gates[g][u] = x[u] + (float)sum[u] * (h_scale * scale[u]);
        } else {
            const float multiplier = h_scale * a->r_scale[0];
            for (Py_ssize_t u = 0; u < units; u++)
                gates[g][u] = x[u] + (float)sum[u] * multiplier;
        }
        if (a->bias == NULL)
            for (Py_ssize_t u = 0; u < units; u++)
                gates[g][u] = gate_clip(gates[g][u], NULL, 0, clip);
        else
            for (Py_ssize_t u = 0; u < units; u++)
                gates[g][u] = gate_clip(gates[g][u], a->bias + column0, u, clip);
    }
    for (Py_ssize_t u = 0; u < units; u++) { /* ONNX's gate order: i, o, f, c */
        float input = mlas_logistic(gates[0][u]);
        float forget = mlas_logistic(gates[2][u]);
        float cell = mlas_tanh(gates[3][u]);
        float state = c[block + u] * forget + input * cell;
        float output = mlas_logistic(gates[1][u]);
        c[block + u] = state;
        h[block + u] = mlas_tanh(state) * output;
    }
}

/* One step for the hidden units [first, last) (whole blocks) of every batch row: their
 * columns of the recurrent products (one contiguous run), then their gates, cell and
 * hidden state, block by block (the loop over a block's units vectorises). Units are
 * independent within a step (the products read the quantised state, not h), so the blocks
 * of a step can run as parallel tasks. */
MULTIVERSIONED MLAS_FUNCTIONS
static void dq_lstm_units(const DqLstm *a, PairProducts products, QuadProducts quad_products,
                          const void *matrix, Py_ssize_t step, float h_scale, int32_t h_zero,
                          Py_ssize_t first, Py_ssize_t last) {
    const Py_ssize_t hidden = a->hidden, width = 4 * hidden, batch = a->batch;
    const int per_column = a->scales != 1;
    for (Py_ssize_t b = 0; b < batch; b++) {
        const int32_t *sums = a->sums + b * width;
        if (quad_products != NULL)
            quad_products(a->unsigned_state + b * 4 * ((hidden + 3) / 4), a->quads,
                          a->column_sums, h_zero, a->sums + b * width, hidden, first, last);
        else
            products(a->quantized + b * hidden, matrix, a->sums + b * width, hidden, width,
                     4 * first, 4 * last);
        const float *gx = a->gates_x + (step * batch + b) * width;
        float *h = a->h + b * hidden, *c = a->c + b * hidden;
        for (Py_ssize_t block = first; block < last; block += DQ_UNITS) {
            Py_ssize_t units = hidden - block < DQ_UNITS ? hidden - block : DQ_UNITS;
            if (units == DQ_UNITS) /* (a constant trip count: the loops become vectors) */
                dq_lstm_gates(a, gx, sums + 4 * block, h_scale, per_column, block, DQ_UNITS,
                              h, c);
            else
                dq_lstm_gates(a, gx, sums + 4 * block, h_scale, per_column, block, units,
                              h, c);
        }
    }
}

typedef struct {
    const DqLstm *lstm;
    PairProducts products;
    QuadProducts quad_products; /* NULL: the pairs' products */
    const void *matrix;
    Py_ssize_t step, per_task;
    float h_scale;
    int32_t h_zero;
} DqLstmStep;

static void dq_lstm_task(void *context, ptrdiff_t task) {
    const DqLstmStep *s = context;
    Py_ssize_t first = task * s->per_task;
    Py_ssize_t last = first + s->per_task < s->lstm->hidden ? first + s->per_task
                                                            : s->lstm->hidden;
    dq_lstm_units(s->lstm, s->products, s->quad_products, s->matrix, s->step, s->h_scale,
                  s->h_zero, first, last);
}

/* A step's recurrent product streams all of R (4H x H bytes: 2.4 MB at H = 768, more than
 * a core's L2), so a large one is cut into tasks of whole unit blocks, a few per thread
 * (each streams its own columns); a small one runs on the caller. */
#define DQ_LSTM_SERIAL_WORK 131072

MULTIVERSIONED MLAS_FUNCTIONS /* (quantize_state inlined: rintf is one instruction) */
static void dq_lstm_loop(const DqLstm *a) {
    const Py_ssize_t hidden = a->hidden, batch = a->batch;
    DqLstmStep s = {a, pair_products_for(a->narrow != NULL),
                    a->quads != NULL ? quad_products_for() : NULL,
                    a->narrow != NULL ? (const void *)a->narrow : (const void *)a->pairs, 0,
                    hidden, 0.0f, 0};
    const Py_ssize_t quad_length = 4 * ((hidden + 3) / 4);
    if ((double)batch * 4.0 * (double)hidden * (double)hidden >= DQ_LSTM_SERIAL_WORK &&
        pool_threads() > 1) {
        Py_ssize_t tasks = 2 * (Py_ssize_t)pool_threads();
        s.per_task = ((hidden + tasks - 1) / tasks + DQ_UNITS - 1) / DQ_UNITS * DQ_UNITS;
    }
    Py_ssize_t tasks = (hidden + s.per_task - 1) / s.per_task;
    for (Py_ssize_t step = 0; step < a->steps; step++) {
        int32_t h_zero;
        quantize_state(a->h, batch * hidden, a->quantized, &s.h_scale, &h_zero);
        if (s.quad_products != NULL) /* q + z as bytes, rows padded with zeros to quads */
            for (Py_ssize_t b = 0; b < batch; b++)
                for (Py_ssize_t i = 0; i < hidden; i++)
                    a->unsigned_state[b * quad_length + i] =
                        (uint8_t)(a->quantized[b * hidden + i] + h_zero);
        s.step = step;
        s.h_zero = h_zero;
        if (tasks > 1)
            pool_run(tasks, dq_lstm_task, &s);
        else
            dq_lstm_units(a, s.products, s.quad_products, s.matrix, step, s.h_scale, h_zero,
                          0, hidden);
        if (a->y != NULL) {
            Py_ssize_t t = a->reverse ? a->steps - 1 - step : step;
            memcpy(a->y + t * batch * hidden, a->h, (size_t)(batch * hidden) * sizeof(float));
        }
    }
}

/* -- tree ensembles: the walk of openacl.model.host_ml's compiled forests -----------------
 * host_ml compiles a forest into slots (its design note): slot s compares x[row][column]
 * with its bound (x <= bound, or one of the RAW kinds where a kind is given) and the lane
 * moves to slot next + (the comparison). A leaf slot points to itself and reads a NaN
 * column, so a lane at its leaf stays; slots 0 .. trees - 1 are the roots. A lane is a
 * (tree, row) pair, numbered tree-major (tree * rows + row).
 *
 * Invariants: every slot a step reads is checked before its read (its column against the
 * row width, the slot it moves to against the slot count), so no slot contents can make
 * the walk read outside its buffers; a lane takes at most `steps` steps (the forest's
 * depth) and must then be at a leaf, so a malformed forest (a cycle) ends with an error
 * instead of a hang. host_ml checks its slots once when it builds them: these checks never
 * fail for its forests and cost nothing on the walk's critical path (predicted branches).
 * TREE_GROUP lanes walk side by side, a step each in turn until none moves, so that their
 * slot and feature loads overlap (a lane's steps are a chain of dependent loads). A lane's
 * root, row and place in out come from a cursor over [first, last), never from a buffer.
 * Tasks walk disjoint ranges of lanes and write disjoint elements of out; only the walk
 * runs here (host_ml sums the leaves). */
#define TREE_GROUP 8 /* lanes walked side by side */
#define TREE_SERIAL_STEPS 32768 /* fewer lane steps (lanes x (steps + 1)) run on the caller
                                 * alone: waking a worker costs more (the GEMM's rule) */
#define TREE_TASKS_PER_THREAD 4 /* pool tasks per thread: lanes differ in their depth */
/* the comparison kinds (host_ml's LEQ_FORM, RAW_EQ, RAW_NEQ, RAW_TRUNC) and the flag
 * (host_ml's RAW_TRACK) of a RAW slot whose comparison is true for a NaN */
#define TREE_LEQ 0
#define TREE_RAW_EQ 1
#define TREE_RAW_NEQ 2
#define TREE_RAW_TRUNC 3
#define TREE_KIND_MASK 3
#define TREE_TRACK 4
/* RAW_TRUNC compares int32(x), truncated, as x86's cvttsd2si gives it: INT32_MIN outside
 * (INT32_MIN - 1, 2^31), NaN included */
#define TRUNC_LOW -2147483649.0
#define TRUNC_HIGH 2147483648.0
#define TRUNC_OUTSIDE -2147483648.0
/* why a lane failed (a failure code is its position in out * TREE_FAILURES + reason) */
#define TREE_OUT_OF_RANGE 0 /* a slot's column or next slot is out of range */
#define TREE_NO_LEAF 1 /* still walking, or stuck on a branch slot, after `steps` steps */
#define TREE_FAILURES 2

/* one slot, as host_ml lays it out (its SLOT_RECORDS): the bound, the column it reads, the
 * first slot of the pair it leads to (a leaf: itself) */
typedef struct {
    double bound;
    int32_t column, next;
} TreeSlotDouble; /* 16 bytes */

typedef struct {
    float bound;
    int32_t column, next;
} TreeSlotFloat; /* 12 bytes */

typedef struct {
    const void *rows;         /* count x width, float32 or float64 */
    const void *slots;        /* slot_count TreeSlotFloat or TreeSlotDouble */
    const int32_t *leaves;    /* per slot its leaf rank, -1 for a branch slot */
    const int8_t *kinds;      /* per slot its kind | TREE_TRACK, or NULL: all TREE_LEQ */
    int64_t *out;             /* count x trees leaf ranks */
    Py_ssize_t count, width, trees, slot_count, steps, lanes, lanes_per_task;
    int double_type;          /* rows and bounds are float64 (else float32) */
    _Atomic Py_ssize_t failure; /* the least failure code, or PY_SSIZE_T_MAX */
} TreeWalk;

/* x <= bound, or the RAW kind's comparison (host_ml's _Forest._compare) */
INLINE int tree_compare_double(double x, double bound, int kind) {
    int go;
    switch (kind & TREE_KIND_MASK) {
    case TREE_RAW_EQ: go = x == bound; break;
    case TREE_RAW_NEQ: go = x != bound; break;
    case TREE_RAW_TRUNC:
        go = (x > TRUNC_LOW && x < TRUNC_HIGH ? trunc(x) : TRUNC_OUTSIDE) == bound;
        break;
    default: go = x <= bound;
    }
    return go | ((kind & TREE_TRACK) && x != x);
}

INLINE int tree_compare_float(float x, float bound, int kind) {
    int go;
    switch (kind & TREE_KIND_MASK) {
    case TREE_RAW_EQ: go = x == bound; break;
    case TREE_RAW_NEQ: go = x != bound; break;
    case TREE_RAW_TRUNC: /* (the comparisons with the limits in double: exact) */
        go = (x > TRUNC_LOW && x < TRUNC_HIGH ? truncf(x) : (float)TRUNC_OUTSIDE) == bound;
        break;
    default: go = x <= bound;
    }
    return go | ((kind & TREE_TRACK) && x != x);
}

/* Walks lanes [first, last) and writes their leaf ranks: -1, or the first failing lane's
 * code (its position in out, not its lane number). `raw` is a constant at each call (the
 * loop is compiled twice). The group's loops are unrolled whole, so that its slots stay in
 * registers; a group past `last` repeats its last lane (the same leaf, written twice). */
#define DEFINE_TREE_WALK(NAME, Value, Slot, COMPARE)                                        \
    INLINE Py_ssize_t NAME(const TreeWalk *w, Py_ssize_t first, Py_ssize_t last, int raw) { \
        const Slot *slots = w->slots;                                                       \
        const uint32_t width = (uint32_t)w->width, slot_count = (uint32_t)w->slot_count;    \
        const Py_ssize_t count = w->count, trees = w->trees;                                \
        Py_ssize_t tree = first / count, row = first % count; /* the next lane's */         \
        for (Py_ssize_t start = first; start < last; start += TREE_GROUP) {                 \
            uint32_t slot[TREE_GROUP];                                                      \
            const Value *x_row[TREE_GROUP];                                                 \
            Py_ssize_t at_out[TREE_GROUP];                                                  \
            _Pragma("GCC unroll 16") for (int g = 0; g < TREE_GROUP; g++) {                 \
                slot[g] = (uint32_t)tree;                                                   \
                x_row[g] = (const Value *)w->rows + row * w->width;                         \
                at_out[g] = row * trees + tree;                                             \
                if (start + g + 1 < last && ++row == count) {                               \
                    row = 0;                                                                \
                    tree++;                                                                 \
                }                                                                           \
            }                                                                               \
            for (Py_ssize_t step = 0; step < w->steps; step++) {                            \
                uint32_t moved = 0;                                                         \
                _Pragma("GCC unroll 16") for (int g = 0; g < TREE_GROUP; g++) {             \
                    const Slot *at = &slots[slot[g]];                                       \
                    uint32_t column = (uint32_t)at->column;                                 \
                    if (__builtin_expect(column >= width, 0))                               \
                        return at_out[g] * TREE_FAILURES + TREE_OUT_OF_RANGE;               \
                    Value x = x_row[g][column];                                             \
                    int go = raw ? COMPARE(x, at->bound, w->kinds[slot[g]]) : x <= at->bound; \
                    uint32_t next = (uint32_t)at->next + (uint32_t)go;                      \
                    if (__builtin_expect(next >= slot_count, 0))                            \
                        return at_out[g] * TREE_FAILURES + TREE_OUT_OF_RANGE;               \
                    moved |= next ^ slot[g];                                                \
                    slot[g] = next;                                                         \
                }                                                                           \
                if (!moved) break;                                                          \
            }                                                                               \
            _Pragma("GCC unroll 16") for (int g = 0; g < TREE_GROUP; g++) {                 \
                int32_t leaf = w->leaves[slot[g]];                                          \
                if (leaf < 0) return at_out[g] * TREE_FAILURES + TREE_NO_LEAF;              \
                w->out[at_out[g]] = leaf;                                                   \
            }                                                                               \
        }                                                                                   \
        return -1;                                                                          \
    }

DEFINE_TREE_WALK(tree_walk_double, double, TreeSlotDouble, tree_compare_double)
DEFINE_TREE_WALK(tree_walk_float, float, TreeSlotFloat, tree_compare_float)

static void tree_walk_task(void *context, ptrdiff_t task) {
    TreeWalk *w = context;
    Py_ssize_t first = task * w->lanes_per_task;
    Py_ssize_t last = w->lanes - first < w->lanes_per_task ? w->lanes : first + w->lanes_per_task;
    Py_ssize_t failed;
    if (w->kinds != NULL)
        failed = w->double_type ? tree_walk_double(w, first, last, 1)
                                : tree_walk_float(w, first, last, 1);
    else
        failed = w->double_type ? tree_walk_double(w, first, last, 0)
                                : tree_walk_float(w, first, last, 0);
    if (failed < 0) return;
    Py_ssize_t seen = atomic_load(&w->failure);
    while (failed < seen && !atomic_compare_exchange_weak(&w->failure, &seen, failed)) {
    }
}

/* -- argument handling ------------------------------------------------------------------- */
/* A C-contiguous buffer of one element type (struct `format`, `itemsize` bytes, called
 * `type_name` in the error): 0 with `view` held, or -1 with a TypeError naming the argument
 * and nothing held. */
static int typed_buffer(PyObject *object, Py_buffer *view, int writable, const char *name,
                        const char *format, Py_ssize_t itemsize, const char *type_name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) != 0) return -1;
    if (view->itemsize != itemsize || view->format == NULL || strcmp(view->format, format) != 0) {
        PyErr_Format(PyExc_TypeError, "argument '%s' must be a %s buffer (format '%s'), "
                     "got format '%s'", name, type_name, format,
                     view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int get_float_buffer(PyObject *object, Py_buffer *view, int writable, const char *name) {
    return typed_buffer(object, view, writable, name, "f", 4, "float32");
}

/* -- float16 <-> float32 with the CPU's conversion instructions (F16C) -----------------------
 * IEEE round-to-nearest-even both ways, subnormals and infinities kept, as numpy converts
 * (NaNs stay NaN); numpy's own loops take 1-2 ns an element here, these ~0.1. Without F16C
 * the functions report it and the caller converts with numpy. */
#ifdef X86_KERNELS
__attribute__((target("f16c,avx"))) static void half_to_float_f16c(const uint16_t *in,
                                                                   float *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const void *)(in + i))));
    for (; i < n; i++) out[i] = _cvtsh_ss(in[i]);
}

__attribute__((target("f16c,avx"))) static void float_to_half_f16c(const float *in,
                                                                   uint16_t *out, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((void *)(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) out[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT);
}
#endif

static int half_buffer(PyObject *object, Py_buffer *view, int writable, const char *name) {
    return typed_buffer(object, view, writable, name, "e", 2, "float16");
}

/* convert(half, single, to_single): between a float16 and a float32 buffer of as many
 * values; True, or False where the CPU has no F16C (nothing written) */
static PyObject *py_convert_half(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *half_object, *single_object;
    int to_single;
    if (!PyArg_ParseTuple(args, "OOp", &half_object, &single_object, &to_single)) return NULL;
    Py_buffer half, single;
    if (half_buffer(half_object, &half, !to_single, "half") != 0) return NULL;
    if (get_float_buffer(single_object, &single, to_single, "single") != 0) {
        PyBuffer_Release(&half);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = half.len / 2;
    if (single.len / 4 != n) {
        PyErr_Format(PyExc_ValueError, "the buffers hold %zd float16 and %zd float32 values",
                     n, single.len / 4);
    } else {
        int done = 0;
#ifdef X86_KERNELS
        if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx")) {
            Py_BEGIN_ALLOW_THREADS
            if (to_single)
                half_to_float_f16c(half.buf, single.buf, n);
            else
                float_to_half_f16c(single.buf, half.buf, n);
            Py_END_ALLOW_THREADS
            done = 1;
        }
#endif
        result = PyBool_FromLong(done);
    }
    PyBuffer_Release(&single);
    PyBuffer_Release(&half);
    return result;
}

static int get_double_buffer(PyObject *object, Py_buffer *view, const char *name) {
    return typed_buffer(object, view, 1, name, "d", 8, "float64");
}

static int get_bool_buffer(PyObject *object, Py_buffer *view, const char *name) {
    return typed_buffer(object, view, 0, name, "?", 1, "bool");
}

static int check_count(Py_buffer *view, Py_ssize_t count, const char *name) {
    if (view->len / 4 < count) {
        PyErr_Format(PyExc_ValueError, "argument '%s' holds %zd float32 values, %zd needed",
                     name, view->len / 4, count);
        return -1;
    }
    return 0;
}

/* -- holding a call's buffers ------------------------------------------------------------- */
typedef enum { INPUT, OUTPUT, OPTIONAL_INPUT, OPTIONAL_OUTPUT, BOOL_INPUT } BufferRole;

typedef struct {
    PyObject *object;
    const char *name;
    BufferRole role;
    Py_buffer view;
    int held;
} BufferArg;

static void release_buffers(BufferArg *args, int count) {
    for (int i = count - 1; i >= 0; i--)
        if (args[i].held) {
            PyBuffer_Release(&args[i].view);
            args[i].held = 0;
        }
}

/* Hold every argument's buffer (float32, writable for outputs; bool for BOOL_INPUT; an
 * optional one given as None stays unheld): 0, or -1 with an exception set and nothing
 * held. */
static int hold_buffers(BufferArg *args, int count) {
    for (int i = 0; i < count; i++) {
        BufferArg *arg = &args[i];
        arg->held = 0;
        if ((arg->role == OPTIONAL_INPUT || arg->role == OPTIONAL_OUTPUT) &&
            arg->object == Py_None)
            continue;
        int failed = arg->role == BOOL_INPUT
                         ? get_bool_buffer(arg->object, &arg->view, arg->name)
                         : get_float_buffer(arg->object, &arg->view,
                                            arg->role == OUTPUT || arg->role == OPTIONAL_OUTPUT,
                                            arg->name);
        if (failed) {
            release_buffers(args, i);
            return -1;
        }
        arg->held = 1;
    }
    return 0;
}

/* an argument's data, or NULL for an optional one given as None */
INLINE void *data_of(const BufferArg *arg) { return arg->held ? arg->view.buf : NULL; }

/* an optional argument is None, or holds at least count float32 values */
static int check_optional(BufferArg *arg, Py_ssize_t count) {
    return arg->held ? check_count(&arg->view, count, arg->name) : 0;
}

typedef void (*ElementwiseLoop)(const float *, float *, Py_ssize_t);

/* -- elementwise and row kernels on the pool: disjoint chunks of whole rows ----------------
 * Fewer than POOL_MIN_ELEMENTS values run on the caller (waking a worker costs more);
 * larger calls are cut into tasks of about POOL_CHUNK_ELEMENTS (whole rows for the row
 * kernels). The chunks write disjoint parts of out, so in-place calls stay valid. */
#define POOL_MIN_ELEMENTS 65536
#define POOL_CHUNK_ELEMENTS 32768

/* rows per task for `rows` rows of `length` values: all of them where the call is small */
static Py_ssize_t rows_per_task(Py_ssize_t rows, Py_ssize_t length) {
    if ((double)rows * (double)length < POOL_MIN_ELEMENTS) return rows > 0 ? rows : 1;
    Py_ssize_t per = POOL_CHUNK_ELEMENTS / length;
    return per < 1 ? 1 : per;
}

/* loop(x, out, count), or scaled(x, out, count, parameter), or bounded(x, out, count,
 * parameter, high), whichever is given */
typedef void (*ScaledLoop)(const float *, float *, Py_ssize_t, float);
typedef void (*BoundedLoop)(const float *, float *, Py_ssize_t, float, float);

typedef struct {
    ElementwiseLoop loop;
    ScaledLoop scaled;
    BoundedLoop bounded;
    float parameter, high;
    const float *x;
    float *out;
    Py_ssize_t n, chunk;
} ElementwiseJob;

static void elementwise_task(void *context, ptrdiff_t task) {
    const ElementwiseJob *job = context;
    Py_ssize_t first = task * job->chunk;
    Py_ssize_t count = job->n - first < job->chunk ? job->n - first : job->chunk;
    if (job->bounded != NULL)
        job->bounded(job->x + first, job->out + first, count, job->parameter, job->high);
    else if (job->scaled != NULL)
        job->scaled(job->x + first, job->out + first, count, job->parameter);
    else
        job->loop(job->x + first, job->out + first, count);
}

typedef struct {
    const float *x;
    float *out;
    Py_ssize_t rows, length, per_task;
} RowsJob;

static void softmax_rows_task(void *context, ptrdiff_t task) {
    const RowsJob *job = context;
    Py_ssize_t first = task * job->per_task;
    Py_ssize_t count = job->rows - first < job->per_task ? job->rows - first : job->per_task;
    softmax_rows_loop(job->x + first * job->length, job->out + first * job->length, count,
                      job->length);
}

/* (x, out) of an elementwise kernel, or (x, out, parameter) for a scaled one: out = f(x)
 * in chunks on the pool */
static PyObject *elementwise(PyObject *args, ElementwiseLoop loop, ScaledLoop scaled,
                             BoundedLoop bounded) {
    PyObject *x_object, *out_object;
    ElementwiseJob job = {.loop = loop, .scaled = scaled, .bounded = bounded};
    int parsed = bounded != NULL ? PyArg_ParseTuple(args, "OOff", &x_object, &out_object,
                                                    &job.parameter, &job.high)
                 : scaled != NULL ? PyArg_ParseTuple(args, "OOf", &x_object, &out_object,
                                                     &job.parameter)
                                  : PyArg_ParseTuple(args, "OO", &x_object, &out_object);
    if (!parsed)
        return NULL;
    Py_buffer x, out;
    if (get_float_buffer(x_object, &x, 0, "x") != 0) return NULL;
    if (get_float_buffer(out_object, &out, 1, "out") != 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    job.n = x.len / 4;
    PyObject *result = NULL;
    if (check_count(&out, job.n, "out") == 0) {
        job.x = x.buf;
        job.out = out.buf;
        job.chunk = rows_per_task(job.n, 1);
        Py_BEGIN_ALLOW_THREADS
        pool_run((job.n + job.chunk - 1) / job.chunk, elementwise_task, &job);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&x);
    return result;
}

/* py_NAME(x, out[, parameter[, high]]): one elementwise loop of the above */
#define ELEMENTWISE_FUNCTION(name, loop, scaled, bounded)                                   \
    static PyObject *py_##name(PyObject *Py_UNUSED(self), PyObject *args) {                 \
        return elementwise(args, loop, scaled, bounded);                                     \
    }
ELEMENTWISE_FUNCTION(clamp, NULL, NULL, clamp_loop)
ELEMENTWISE_FUNCTION(leaky_relu, NULL, leaky_relu_loop, NULL)
ELEMENTWISE_FUNCTION(gelu_erf, gelu_erf_loop, NULL, NULL)
ELEMENTWISE_FUNCTION(hardswish, hardswish_loop, NULL, NULL)
ELEMENTWISE_FUNCTION(sigmoid, sigmoid_loop, NULL, NULL)
ELEMENTWISE_FUNCTION(tanh, tanh_loop, NULL, NULL)
ELEMENTWISE_FUNCTION(exp, exp_loop, NULL, NULL)
ELEMENTWISE_FUNCTION(erf, erf_loop, NULL, NULL)
ELEMENTWISE_FUNCTION(silu, silu_loop, NULL, NULL)

/* The (x, out, length) arguments of a row kernel: x float32 in whole rows of `length`, out
 * float32 like x (per_row_double 0) or float64 with one value per row (1). Returns the row
 * count with both buffers held, or -1 with an exception set and nothing held. */
static Py_ssize_t row_arguments(PyObject *args, Py_buffer *x, Py_buffer *out,
                                Py_ssize_t *length, int per_row_double) {
    PyObject *x_object, *out_object;
    if (!PyArg_ParseTuple(args, "OOn", &x_object, &out_object, length)) return -1;
    if (*length <= 0) {
        PyErr_Format(PyExc_ValueError, "argument 'length' must be > 0, got %zd", *length);
        return -1;
    }
    if (get_float_buffer(x_object, x, 0, "x") != 0) return -1;
    if ((per_row_double ? get_double_buffer(out_object, out, "out")
                        : get_float_buffer(out_object, out, 1, "out")) != 0) {
        PyBuffer_Release(x);
        return -1;
    }
    Py_ssize_t count = x->len / 4, rows = count / *length;
    if (rows * *length != count) {
        PyErr_Format(PyExc_ValueError, "argument 'x' holds %zd values, not whole rows of "
                     "'length' %zd", count, *length);
    } else if (per_row_double && out->len / 8 < rows) {
        PyErr_Format(PyExc_ValueError, "argument 'out' holds %zd float64 values, %zd needed",
                     out->len / 8, rows);
    } else if (per_row_double || check_count(out, count, "out") == 0) {
        return rows;
    }
    PyBuffer_Release(out);
    PyBuffer_Release(x);
    return -1;
}

static PyObject *py_softmax_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer x, out;
    Py_ssize_t length, rows = row_arguments(args, &x, &out, &length, 0);
    if (rows < 0) return NULL;
    RowsJob job = {(const float *)x.buf, (float *)out.buf, rows, length,
                   rows_per_task(rows, length)};
    Py_BEGIN_ALLOW_THREADS
    pool_run((rows + job.per_task - 1) / job.per_task, softmax_rows_task, &job);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&x);
    Py_RETURN_NONE;
}

static PyObject *py_layer_norm_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    BufferArg b[6] = {
        {.name = "x", .role = INPUT},
        {.name = "weight", .role = OPTIONAL_INPUT},
        {.name = "bias", .role = OPTIONAL_INPUT},
        {.name = "out", .role = OUTPUT},
        {.name = "mean", .role = OUTPUT},
        {.name = "rstd", .role = OUTPUT},
    };
    Py_ssize_t length;
    double eps;
    if (!PyArg_ParseTuple(args, "OOOOOOnd", &b[0].object, &b[1].object, &b[2].object,
                          &b[3].object, &b[4].object, &b[5].object, &length, &eps))
        return NULL;
    if (length <= 0) {
        PyErr_Format(PyExc_ValueError, "argument 'length' must be > 0, got %zd", length);
        return NULL;
    }
    if (hold_buffers(b, 6) != 0) return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = b[0].view.len / 4, rows = count / length;
    if (rows * length != count) {
        PyErr_Format(PyExc_ValueError, "argument 'x' holds %zd values, not whole rows of "
                     "'length' %zd", count, length);
    } else if (check_optional(&b[1], length) == 0 && check_optional(&b[2], length) == 0 &&
               check_count(&b[3].view, count, "out") == 0 &&
               check_count(&b[4].view, rows, "mean") == 0 &&
               check_count(&b[5].view, rows, "rstd") == 0) {
        Py_BEGIN_ALLOW_THREADS
        layer_norm_loop(data_of(&b[0]), data_of(&b[1]), data_of(&b[2]), data_of(&b[3]),
                        data_of(&b[4]), data_of(&b[5]), rows, length, eps);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    release_buffers(b, 6);
    return result;
}

static PyObject *py_row_sums(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer x, out;
    Py_ssize_t length, rows = row_arguments(args, &x, &out, &length, 1);
    if (rows < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    row_sums_loop((const float *)x.buf, (double *)out.buf, rows, length);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    PyBuffer_Release(&x);
    Py_RETURN_NONE;
}

static PyObject *py_add_layer_norm_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    BufferArg b[9] = {
        {.name = "x1", .role = INPUT},
        {.name = "x2", .role = INPUT},
        {.name = "bias", .role = OPTIONAL_INPUT},
        {.name = "gamma", .role = INPUT},
        {.name = "beta", .role = INPUT},
        {.name = "y", .role = OUTPUT},
        {.name = "x_out", .role = OPTIONAL_OUTPUT},
        {.name = "mean", .role = OUTPUT},
        {.name = "rstd", .role = OUTPUT},
    };
    Py_ssize_t length;
    double eps;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOnd", &b[0].object, &b[1].object, &b[2].object,
                          &b[3].object, &b[4].object, &b[5].object, &b[6].object, &b[7].object,
                          &b[8].object, &length, &eps))
        return NULL;
    if (length <= 0) {
        PyErr_Format(PyExc_ValueError, "argument 'length' must be > 0, got %zd", length);
        return NULL;
    }
    if (hold_buffers(b, 9) != 0) return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = b[0].view.len / 4, rows = count / length;
    /* bias: one row (length values) or one per row of x1 */
    Py_ssize_t bias_stride = b[2].held && b[2].view.len / 4 >= count && count > length ? length
                                                                                      : 0;
    if (rows * length != count) {
        PyErr_Format(PyExc_ValueError, "argument 'x1' holds %zd values, not whole rows of "
                     "'length' %zd", count, length);
    } else if (check_count(&b[1].view, count, "x2") == 0 && check_optional(&b[2], length) == 0 &&
               check_count(&b[3].view, length, "gamma") == 0 &&
               check_count(&b[4].view, length, "beta") == 0 &&
               check_count(&b[5].view, count, "y") == 0 && check_optional(&b[6], count) == 0 &&
               check_count(&b[7].view, rows, "mean") == 0 &&
               check_count(&b[8].view, rows, "rstd") == 0) {
        AddLayerNorm call = {data_of(&b[0]), data_of(&b[1]), data_of(&b[2]), data_of(&b[3]),
                             data_of(&b[4]), data_of(&b[5]), data_of(&b[6]), data_of(&b[7]),
                             data_of(&b[8]), rows, length, bias_stride, eps};
        Py_BEGIN_ALLOW_THREADS
        add_layer_norm_loop(&call);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    release_buffers(b, 9);
    return result;
}

/* a * b + c with overflow checks: -1 on overflow */
static Py_ssize_t multiply_add(Py_ssize_t a, Py_ssize_t b, Py_ssize_t c) {
    Py_ssize_t product, sum;
    if (__builtin_mul_overflow(a, b, &product) || __builtin_add_overflow(product, c, &sum))
        return -1;
    return sum;
}

/* a * b * c * d, or -1 when it overflows (hostile dims must not wrap the length checks) */
static Py_ssize_t product4(Py_ssize_t a, Py_ssize_t b, Py_ssize_t c, Py_ssize_t d) {
    Py_ssize_t ab, abc, abcd;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) ||
        __builtin_mul_overflow(abc, d, &abcd))
        return -1;
    return abcd;
}

/* (out - 1) * stride + dilation * (kernel - 1) + 1: the input rows (or columns) the
 * outputs read, or -1 when it overflows */
static Py_ssize_t input_span(Py_ssize_t out, Py_ssize_t stride, Py_ssize_t dilation,
                             Py_ssize_t kernel) {
    Py_ssize_t reach, extent, span;
    if (__builtin_mul_overflow(out - 1, stride, &reach) ||
        __builtin_mul_overflow(dilation, kernel - 1, &extent) ||
        __builtin_add_overflow(reach, extent, &span) || __builtin_add_overflow(span, 1, &span))
        return -1;
    return span;
}

/* lstm_sequence / gru_sequence: (projected, recurrent, [hidden_bias,] h, [c,] y, gates,
 * (T, B, H), (y_row, y_offset), reverse, transposed) */
typedef struct {
    Recurrence call;
    BufferArg b[7];
} HeldRecurrence;

/* parse one call's arguments and hold its buffers: 0, or -1 with an exception set and
 * nothing held */
static int hold_recurrence(PyObject *args, int gate_count, HeldRecurrence *held) {
    const int lstm = gate_count == 4;
    BufferArg *b = held->b;
    const BufferArg roles[7] = {
        {.name = "projected", .role = INPUT}, {.name = "recurrent", .role = INPUT},
        {.name = "hidden_bias", .role = OPTIONAL_INPUT}, {.name = "h", .role = OUTPUT},
        {.name = "c", .role = lstm ? OUTPUT : OPTIONAL_OUTPUT}, {.name = "y", .role = OUTPUT},
        {.name = "gates", .role = OUTPUT},
    };
    memcpy(b, roles, sizeof roles);
    Py_ssize_t steps, batch, hidden, y_row, y_offset;
    int reverse, transposed, parsed;
    b[2].object = b[4].object = Py_None;
    if (lstm)
        parsed = PyArg_ParseTuple(args, "OOOOOO(nnn)(nn)pp", &b[0].object, &b[1].object,
                                  &b[3].object, &b[4].object, &b[5].object, &b[6].object,
                                  &steps, &batch, &hidden, &y_row, &y_offset, &reverse,
                                  &transposed);
    else
        parsed = PyArg_ParseTuple(args, "OOOOOO(nnn)(nn)pp", &b[0].object, &b[1].object,
                                  &b[2].object, &b[3].object, &b[5].object, &b[6].object,
                                  &steps, &batch, &hidden, &y_row, &y_offset, &reverse,
                                  &transposed);
    if (!parsed) return -1;
    if (steps < 0 || batch < 0 || hidden <= 0 || y_offset < 0 || y_row < hidden ||
        y_offset > y_row - hidden) {
        PyErr_Format(PyExc_ValueError, "bad sizes: steps %zd, batch %zd, hidden %zd, y_row %zd,"
                     " y_offset %zd", steps, batch, hidden, y_row, y_offset);
        return -1;
    }
    Py_ssize_t width = multiply_add(hidden, gate_count, 0), rows = multiply_add(steps, batch, 0);
    Py_ssize_t projected = width < 0 || rows < 0 ? -1 : multiply_add(rows, width, 0);
    Py_ssize_t state = multiply_add(batch, hidden, 0), y_count = multiply_add(rows, y_row, 0);
    Py_ssize_t recurrent = multiply_add(hidden, width, 0), gates = multiply_add(batch, width, 0);
    if (projected < 0 || state < 0 || y_count < 0 || recurrent < 0 || gates < 0) {
        PyErr_SetString(PyExc_OverflowError, "recurrence: sizes overflow");
        return -1;
    }
    if (hold_buffers(b, 7) != 0) return -1;
    if (check_count(&b[0].view, projected, "projected") != 0 ||
        check_count(&b[1].view, recurrent, "recurrent") != 0 ||
        check_optional(&b[2], width) != 0 || check_count(&b[3].view, state, "h") != 0 ||
        check_optional(&b[4], state) != 0 || check_count(&b[5].view, y_count, "y") != 0 ||
        check_count(&b[6].view, gates, "gates") != 0) {
        release_buffers(b, 7);
        return -1;
    }
    Recurrence call = {data_of(&b[0]), data_of(&b[1]), data_of(&b[2]), data_of(&b[3]),
                       data_of(&b[4]), data_of(&b[5]), data_of(&b[6]), steps, batch, hidden,
                       gate_count, y_row, y_offset, reverse, transposed};
    held->call = call;
    return 0;
}

static void run_recurrence(const Recurrence *call) {
    if (call->gate_count == 4)
        lstm_sequence_loop(call);
    else
        gru_sequence_loop(call);
}

static PyObject *recurrence(PyObject *args, int gate_count) {
    HeldRecurrence held;
    if (hold_recurrence(args, gate_count, &held) != 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    run_recurrence(&held.call);
    Py_END_ALLOW_THREADS
    release_buffers(held.b, 7);
    return Py_NewRef(Py_None);
}

static void recurrence_task(void *context, ptrdiff_t task) {
    run_recurrence(&((HeldRecurrence *)context)[task].call);
}

#define MAX_RECURRENCES 64 /* calls of one lstm_sequences / gru_sequences */

/* the number of calls in a list of argument tuples (lstm_sequences, gru_sequences,
 * dq_lstm_sequences), or -1 with a TypeError */
static Py_ssize_t call_count(PyObject *calls) {
    if (!PyList_Check(calls) || PyList_GET_SIZE(calls) > MAX_RECURRENCES) {
        PyErr_Format(PyExc_TypeError, "expected a list of at most %d argument tuples",
                     MAX_RECURRENCES);
        return -1;
    }
    return PyList_GET_SIZE(calls);
}

/* several independent recurrences (a bidirectional layer's two directions) at once on the
 * pool: their outputs must not overlap (the Python callers give disjoint ones) */
static PyObject *recurrences(PyObject *calls, int gate_count) {
    Py_ssize_t count = call_count(calls), done = 0;
    if (count < 0) return NULL;
    HeldRecurrence *held = PyMem_RawMalloc((size_t)(count ? count : 1) * sizeof *held);
    if (held == NULL) return PyErr_NoMemory();
    for (; done < count; done++)
        if (hold_recurrence(PyList_GET_ITEM(calls, done), gate_count, &held[done]) != 0)
            break;
    if (done == count) {
        Py_BEGIN_ALLOW_THREADS
        pool_run(count, recurrence_task, held);
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t i = 0; i < done; i++) release_buffers(held[i].b, 7);
    PyMem_RawFree(held);
    return done == count ? Py_NewRef(Py_None) : NULL;
}

static PyObject *py_lstm_sequences(PyObject *Py_UNUSED(self), PyObject *calls) {
    return recurrences(calls, 4);
}

static PyObject *py_gru_sequences(PyObject *Py_UNUSED(self), PyObject *calls) {
    return recurrences(calls, 3);
}

static PyObject *py_lstm_sequence(PyObject *Py_UNUSED(self), PyObject *args) {
    return recurrence(args, 4);
}

static PyObject *py_gru_sequence(PyObject *Py_UNUSED(self), PyObject *args) {
    return recurrence(args, 3);
}

/* int8_gemm(a, a_zero, quads, column_sums, out, (M, K, N)) */
static PyObject *py_int8_gemm(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *a_object, *quads_object, *sums_object, *out_object;
    Py_ssize_t rows, depth, columns;
    int a_zero;
    if (!PyArg_ParseTuple(args, "OiOOO(nnn)", &a_object, &a_zero, &quads_object, &sums_object,
                          &out_object, &rows, &depth, &columns))
        return NULL;
    if (quad_products_for() == NULL) {
        PyErr_SetString(PyExc_ValueError, "int8_gemm: this CPU has no AVX-512 VNNI");
        return NULL;
    }
    if (rows < 0 || depth <= 0 || columns <= 0 || a_zero < 0 || a_zero > 255 ||
        depth > 65000) {
        PyErr_Format(PyExc_ValueError, "int8_gemm: bad sizes M %zd, K %zd, N %zd (K <= 65000)"
                     " or a_zero %d (0..255)", rows, depth, columns, a_zero);
        return NULL;
    }
    Py_ssize_t quad_rows = (depth + 3) / 4, blocks = (columns + QUAD_COLUMNS - 1) / QUAD_COLUMNS;
    Py_ssize_t a_count = multiply_add(rows, 4 * quad_rows, 0);
    Py_ssize_t quad_count = multiply_add(multiply_add(blocks, quad_rows, 0), QUAD_BYTES, 0);
    Py_ssize_t out_count = multiply_add(rows, columns, 0);
    if (a_count < 0 || quad_count < 0 || out_count < 0) {
        PyErr_SetString(PyExc_OverflowError, "int8_gemm: sizes overflow");
        return NULL;
    }
    Py_buffer a, quads, sums;
    if (typed_buffer(a_object, &a, 0, "a", "B", 1, "uint8") != 0) return NULL;
    if (typed_buffer(quads_object, &quads, 0, "quads", "b", 1, "int8") != 0) {
        PyBuffer_Release(&a);
        return NULL;
    }
    if (typed_buffer(sums_object, &sums, 0, "column_sums", "i", 4, "int32") != 0) {
        PyBuffer_Release(&quads);
        PyBuffer_Release(&a);
        return NULL;
    }
    BufferArg b[1] = {{.object = out_object, .name = "out", .role = OUTPUT}};
    PyObject *result = NULL;
    if (a.len < a_count || quads.len < quad_count || sums.len / 4 < blocks * QUAD_COLUMNS) {
        PyErr_Format(PyExc_ValueError, "int8_gemm: a holds %zd bytes, quads %zd, column_sums "
                     "%zd values; %zd, %zd and %zd needed", a.len, quads.len, sums.len / 4,
                     a_count, quad_count, blocks * QUAD_COLUMNS);
    } else if (hold_buffers(b, 1) == 0) {
        if (check_count(&b[0].view, out_count, "out") == 0) {
            QuadGemm job = {a.buf, quads.buf, sums.buf, b[0].view.buf, rows, quad_rows,
                            columns, 1, (int32_t)a_zero};
            if (rows > 0) {
                Py_BEGIN_ALLOW_THREADS
                quad_gemm(&job);
                Py_END_ALLOW_THREADS
            }
            result = Py_NewRef(Py_None);
        }
        release_buffers(b, 1);
    }
    PyBuffer_Release(&sums);
    PyBuffer_Release(&quads);
    PyBuffer_Release(&a);
    return result;
}

static PyObject *py_dq_lstm_vnni(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args)) {
    return PyBool_FromLong(quad_products_for() != NULL);
}

/* one dq_lstm_sequence call, parsed and its buffers held (release_dq_lstm lets them go) */
typedef struct {
    DqLstm call;
    Py_buffer r, quads, column_sums;
    BufferArg b[6];
    int held_r, vnni, held_b;
    int32_t *quantized;
    uint8_t *unsigned_state;
} HeldDqLstm;

static void release_dq_lstm(HeldDqLstm *h) {
    if (h->held_b) release_buffers(h->b, 6);
    if (h->vnni) {
        PyBuffer_Release(&h->column_sums);
        PyBuffer_Release(&h->quads);
    }
    if (h->held_r) PyBuffer_Release(&h->r);
    PyMem_RawFree(h->quantized);
    PyMem_RawFree(h->unsigned_state);
    h->held_b = h->vnni = h->held_r = 0;
    h->quantized = NULL;
    h->unsigned_state = NULL;
}

/* parse and hold: 0, or -1 with an exception set and nothing held */
static int hold_dq_lstm(PyObject *args, HeldDqLstm *h) {
    memset(h, 0, sizeof *h);
    PyObject *gx_object, *r_object, *scale_object, *bias_object, *h_object, *c_object, *y_object;
    PyObject *quads_object = Py_None, *column_sums_object = Py_None;
    Py_ssize_t steps, batch, hidden;
    float clip;
    int reverse;
    if (!PyArg_ParseTuple(args, "OOOOOOO(nnn)fp|OO", &gx_object, &r_object, &scale_object,
                          &bias_object, &h_object, &c_object, &y_object, &steps, &batch,
                          &hidden, &clip, &reverse, &quads_object, &column_sums_object))
        return -1;
    if (steps < 0 || batch < 0 || hidden <= 0) {
        PyErr_Format(PyExc_ValueError, "bad sizes: steps %zd, batch %zd, hidden %zd", steps,
                     batch, hidden);
        return -1;
    }
    Py_ssize_t width = multiply_add(hidden, 4, 0), rows = multiply_add(steps, batch, 0);
    Py_ssize_t gx_count = width < 0 || rows < 0 ? -1 : multiply_add(rows, width, 0);
    Py_ssize_t state = multiply_add(batch, hidden, 0);
    Py_ssize_t y_count = rows < 0 ? -1 : multiply_add(rows, hidden, 0);
    Py_ssize_t sums = multiply_add(batch, width, 0);
    if (gx_count < 0 || state < 0 || y_count < 0 || sums < 0 ||
        sums > PY_SSIZE_T_MAX / 8) {
        PyErr_SetString(PyExc_OverflowError, "dq_lstm_sequence: sizes overflow");
        return -1;
    }
    if (PyObject_GetBuffer(r_object, &h->r, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) return -1;
    h->held_r = 1;
    Py_buffer *r = &h->r;
    Py_ssize_t pair_count = multiply_add((hidden + 1) / 2 * 2, width, 0);
    int narrow = r->itemsize == 1 && r->format != NULL && strcmp(r->format, "b") == 0;
    int wide = r->itemsize == 2 && r->format != NULL && strcmp(r->format, "h") == 0;
    if (!(narrow || wide) || pair_count < 0 || r->len / r->itemsize < pair_count) {
        PyErr_Format(PyExc_TypeError, "argument 'pairs' must be an int16 or int8 buffer of %zd "
                     "values (ceil(H / 2), 4H, 2)", pair_count);
        goto fail;
    }
    if ((quads_object == Py_None) != (column_sums_object == Py_None) ||
        (quads_object != Py_None && (!narrow || quad_products_for() == NULL))) {
        PyErr_SetString(PyExc_ValueError, "dq_lstm_sequence: quads and column_sums go "
                        "together, with an int8 R, on a CPU with AVX-512 VNNI");
        goto fail;
    }
    Py_ssize_t blocks = (hidden + DQ_UNITS - 1) / DQ_UNITS, quad_rows = (hidden + 3) / 4;
    Py_ssize_t quad_count = multiply_add(multiply_add(blocks, quad_rows, 0), QUAD_BYTES, 0);
    Py_ssize_t column_sum_count = multiply_add(blocks, QUAD_COLUMNS, 0);
    Py_ssize_t unsigned_bytes = multiply_add(batch, 4 * quad_rows, 0);
    if (quad_count < 0 || column_sum_count < 0 || unsigned_bytes < 0) {
        PyErr_SetString(PyExc_OverflowError, "dq_lstm_sequence: sizes overflow");
        goto fail;
    }
    if (quads_object != Py_None) {
        if (typed_buffer(quads_object, &h->quads, 0, "quads", "b", 1, "int8") != 0)
            goto fail;
        if (typed_buffer(column_sums_object, &h->column_sums, 0, "column_sums", "i", 4,
                         "int32") != 0) {
            PyBuffer_Release(&h->quads);
            goto fail;
        }
        h->vnni = 1;
        if (h->quads.len < quad_count || h->column_sums.len / 4 < column_sum_count) {
            PyErr_Format(PyExc_ValueError, "dq_lstm_sequence: quads hold %zd bytes and "
                         "column_sums %zd values; %zd and %zd needed", h->quads.len,
                         h->column_sums.len / 4, quad_count, column_sum_count);
            goto fail;
        }
    }
    const BufferArg roles[6] = {
        {.object = gx_object, .name = "gates_x", .role = INPUT},
        {.object = scale_object, .name = "r_scale", .role = INPUT},
        {.object = bias_object, .name = "bias", .role = OPTIONAL_INPUT},
        {.object = h_object, .name = "h", .role = OUTPUT},
        {.object = c_object, .name = "c", .role = OUTPUT},
        {.object = y_object, .name = "y", .role = OPTIONAL_OUTPUT},
    };
    memcpy(h->b, roles, sizeof roles);
    if (hold_buffers(h->b, 6) != 0) goto fail;
    h->held_b = 1;
    BufferArg *b = h->b;
    Py_ssize_t scales = b[1].view.len / 4;
    if (scales != 1 && scales != width) {
        PyErr_Format(PyExc_ValueError, "argument 'r_scale' holds %zd values; 1 or %zd needed",
                     scales, width);
        goto fail;
    }
    if (check_count(&b[0].view, gx_count, "gates_x") != 0 ||
        check_optional(&b[2], width) != 0 || check_count(&b[3].view, state, "h") != 0 ||
        check_count(&b[4].view, state, "c") != 0 || check_optional(&b[5], y_count) != 0)
        goto fail;
    h->quantized = PyMem_RawMalloc((size_t)(state + sums) * sizeof(int32_t) + 1);
    h->unsigned_state = h->vnni ? PyMem_RawCalloc((size_t)unsigned_bytes + 1, 1) : NULL;
    if (h->quantized == NULL || (h->vnni && h->unsigned_state == NULL)) {
        PyErr_NoMemory();
        goto fail;
    }
    DqLstm call = {data_of(&b[0]), wide ? r->buf : NULL, narrow ? r->buf : NULL,
                   data_of(&b[1]), data_of(&b[2]), data_of(&b[3]), data_of(&b[4]),
                   data_of(&b[5]), h->quantized, h->quantized + state, steps, batch, hidden,
                   scales, clip, reverse, h->vnni ? h->quads.buf : NULL,
                   h->vnni ? h->column_sums.buf : NULL, h->unsigned_state};
    h->call = call;
    return 0;
fail:
    release_dq_lstm(h);
    return -1;
}

static PyObject *py_dq_lstm_sequence(PyObject *Py_UNUSED(self), PyObject *args) {
    HeldDqLstm held;
    if (hold_dq_lstm(args, &held) != 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    dq_lstm_loop(&held.call);
    Py_END_ALLOW_THREADS
    release_dq_lstm(&held);
    return Py_NewRef(Py_None);
}

static void dq_lstm_sequence_task(void *context, ptrdiff_t task) {
    dq_lstm_loop(&((HeldDqLstm *)context)[task].call); /* (its own pool_run runs inline) */
}

/* several independent DynamicQuantizeLSTM directions at once, one per pool thread (each
 * direction's steps then split no further: its R stays in its core's L2) */
static PyObject *py_dq_lstm_sequences(PyObject *Py_UNUSED(self), PyObject *calls) {
    Py_ssize_t count = call_count(calls), done = 0;
    if (count < 0) return NULL;
    HeldDqLstm *held = PyMem_RawMalloc((size_t)(count ? count : 1) * sizeof *held);
    if (held == NULL) return PyErr_NoMemory();
    for (; done < count; done++)
        if (hold_dq_lstm(PyList_GET_ITEM(calls, done), &held[done]) != 0)
            break;
    if (done == count) {
        Py_BEGIN_ALLOW_THREADS
        pool_run(count, dq_lstm_sequence_task, held);
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t i = 0; i < done; i++) release_dq_lstm(&held[i]);
    PyMem_RawFree(held);
    return done == count ? Py_NewRef(Py_None) : NULL;
}

static PyObject *py_conv2d_direct(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *x_object, *w_object, *bias_object, *out_object;
    ConvGeometry g;
    int activation = 0;
    float alpha = 0.0f;
    if (!PyArg_ParseTuple(args, "OOOO(nnnn)(nn)(nn)(nn)(nn)(nn)(nn)|if", &x_object, &w_object,
                          &bias_object, &out_object, &g.batch, &g.channels, &g.height,
                          &g.width, &g.out_channels, &g.groups, &g.kernel_h, &g.kernel_w,
                          &g.stride_h, &g.stride_w, &g.pad_h, &g.pad_w, &g.dilation_h,
                          &g.dilation_w, &g.out_h, &g.out_w, &activation, &alpha))
        return NULL;
    if (activation < 0 || activation > GEMM_LAST_ACTIVATION) {
        PyErr_Format(PyExc_ValueError, "conv2d_direct: argument 'activation' = %d is invalid",
                     activation);
        return NULL;
    }
    /* every input read is guarded by the row and column ranges, so any positive output
     * size is memory-safe; the sizes only have to be positive and fit the buffers */
    if (g.batch < 0 || g.channels <= 0 || g.height <= 0 || g.width <= 0 ||
        g.out_channels <= 0 || g.groups <= 0 || g.kernel_h <= 0 || g.kernel_w <= 0 ||
        g.stride_h <= 0 || g.stride_w <= 0 || g.pad_h < 0 || g.pad_w < 0 ||
        g.dilation_h <= 0 || g.dilation_w <= 0 || g.out_h <= 0 || g.out_w <= 0) {
        PyErr_SetString(PyExc_ValueError, "conv2d_direct: channels, groups, sizes, kernel, "
                        "stride, dilation and output size must be > 0, batch and padding >= 0");
        return NULL;
    }
    if (g.channels % g.groups || g.out_channels % g.groups) {
        PyErr_Format(PyExc_ValueError, "conv2d_direct: groups %zd must divide the input "
                     "channels %zd and the output channels %zd", g.groups, g.channels,
                     g.out_channels);
        return NULL;
    }
    Py_ssize_t x_count = product4(g.batch, g.channels, g.height, g.width);
    Py_ssize_t w_count = product4(g.out_channels, g.channels / g.groups, g.kernel_h, g.kernel_w);
    Py_ssize_t out_count = product4(g.batch, g.out_channels, g.out_h, g.out_w);
    if (x_count < 0 || w_count < 0 || out_count < 0) {
        PyErr_SetString(PyExc_OverflowError, "conv2d_direct: sizes overflow");
        return NULL;
    }
    /* work items: (image, group, block of output rows) of about CONV_ITEM_WORK each; a
     * thread's scratch: the group's phased padded planes of one block, a zeroed margin,
     * then two planes' worth of sums (flat: sums and partial sums; by rows: partials) */
    Py_ssize_t group_in = g.channels / g.groups, group_out = g.out_channels / g.groups;
    Py_ssize_t kernel = g.kernel_h * g.kernel_w, taps = group_in * kernel;
    double row_work = (double)g.out_w * (double)group_out * (double)taps;
    double work = row_work * (double)g.out_h * (double)g.groups * (double)g.batch;
    Py_ssize_t block_rows = (Py_ssize_t)(CONV_ITEM_WORK / row_work) + 1;
    if (block_rows > g.out_h) block_rows = g.out_h;
    Py_ssize_t rows = input_span(block_rows, g.stride_h, g.dilation_h, g.kernel_h);
    Py_ssize_t columns = input_span(g.out_w, g.stride_w, g.dilation_w, g.kernel_w);
    Py_ssize_t run = columns < 0 ? -1 : columns / g.stride_w + 1;
    Py_ssize_t plane_floats = product4(rows, run, g.stride_w, 1);
    Py_ssize_t padded_count = product4(plane_floats, group_in, 1, 1);
    Py_ssize_t sums_count = product4(2, plane_floats, 1, 1);
    Py_ssize_t scratch_count = padded_count < 0 || sums_count < 0 ? -1
                             : multiply_add(1, padded_count, VECTOR_LANES);
    scratch_count = scratch_count < 0 ? -1 : multiply_add(1, scratch_count, sums_count);
    if (rows < 0 || columns < 0 || plane_floats < 0 || scratch_count < 0 ||
        scratch_count > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_OverflowError, "conv2d_direct: sizes overflow");
        return NULL;
    }
    BufferArg b[4] = {
        {.object = x_object, .name = "x", .role = INPUT},
        {.object = w_object, .name = "weight", .role = INPUT},
        {.object = bias_object, .name = "bias", .role = OPTIONAL_INPUT},
        {.object = out_object, .name = "out", .role = OUTPUT},
    };
    if (hold_buffers(b, 4) != 0) return NULL;
    PyObject *result = NULL;
    if (check_count(&b[0].view, x_count, "x") != 0 ||
        check_count(&b[1].view, w_count, "weight") != 0 ||
        check_optional(&b[2], g.out_channels) != 0 ||
        check_count(&b[3].view, out_count, "out") != 0)
        goto done;
    if (group_in == 1 && group_out == 1 && kernel <= MAX_TAPS && LANE_DEPTHWISE &&
        g.out_w <= LANE_MAX_WIDTH) {
        int failed;
        Py_BEGIN_ALLOW_THREADS
        failed = lane_depthwise(data_of(&b[0]), data_of(&b[1]), data_of(&b[2]),
                                data_of(&b[3]), &g, activation, alpha);
        Py_END_ALLOW_THREADS
        if (failed)
            PyErr_NoMemory();
        else
            result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t *offsets = PyMem_RawMalloc((size_t)taps * sizeof(Py_ssize_t));
    if (offsets == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t pitch = run * g.stride_w;
    for (Py_ssize_t t = 0; t < taps; t++) { /* tap (ci, kh, kw): weights' order */
        Py_ssize_t ci = t / kernel, kh = t % kernel / g.kernel_w;
        Py_ssize_t column = t % kernel % g.kernel_w * g.dilation_w;
        offsets[t] = ci * plane_floats + kh * g.dilation_h * pitch +
                     (column % g.stride_w) * run + column / g.stride_w;
    }
    DirectConv job = {.x = data_of(&b[0]), .w = data_of(&b[1]), .bias = data_of(&b[2]),
                      .out = data_of(&b[3]), .g = &g, .tap_sums = tap_sums_kernel(),
                      .offsets = offsets, .columns = columns, .run = run, .pitch = pitch,
                      .plane_floats = plane_floats, .group_in = group_in,
                      .group_out = group_out, .taps = taps, .block_rows = block_rows,
                      .blocks = (g.out_h + block_rows - 1) / block_rows,
                      .scratch_floats = scratch_count, .activation = activation,
                      .alpha = alpha};
    atomic_init(&job.failed, 0);
    job.items = g.batch * g.groups * job.blocks;
    job.per_task = work < CONV_SERIAL_WORK ? job.items : 1;
    Py_BEGIN_ALLOW_THREADS
    pool_run((job.items + job.per_task - 1) / job.per_task, direct_conv_task, &job);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(offsets);
    if (atomic_load(&job.failed))
        PyErr_NoMemory();
    else
        result = Py_NewRef(Py_None);
done:
    release_buffers(b, 4);
    return result;
}

static PyObject *py_shifted_sums(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *source_object, *out_object, *bias_object, *offsets_object;
    ShiftedSums g;
    if (!PyArg_ParseTuple(args, "OOOO(nn)(nn)(nnn)", &source_object, &out_object, &bias_object,
                          &offsets_object, &g.channels, &g.channel_stride, &g.rows,
                          &g.row_pitch, &g.cols, &g.out_plane, &g.first_row))
        return NULL;
    if (g.channels <= 0 || g.channel_stride < 0 || g.rows <= 0 || g.row_pitch < 0 ||
        g.cols <= 0 || g.out_plane < 0 || g.first_row < 0) {
        PyErr_SetString(PyExc_ValueError, "shifted_sums: channels, rows and cols must be > 0, "
                        "strides, pitches and first_row >= 0");
        return NULL;
    }
    Py_ssize_t offsets[MAX_TAPS];
    PyObject *sequence = PySequence_Fast(offsets_object, "argument 'offsets' must be a sequence");
    if (sequence == NULL) return NULL;
    g.taps = PySequence_Fast_GET_SIZE(sequence);
    Py_ssize_t reach = 0;
    for (Py_ssize_t t = 0; t < g.taps && t < MAX_TAPS; t++) {
        offsets[t] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(sequence, t));
        if (offsets[t] < 0) break;
        if (offsets[t] > reach) reach = offsets[t];
    }
    Py_DECREF(sequence);
    if (PyErr_Occurred()) return NULL;
    if (g.taps <= 0 || g.taps > MAX_TAPS) {
        PyErr_Format(PyExc_ValueError, "argument 'offsets' must hold 1 to %d taps, got %zd",
                     MAX_TAPS, g.taps);
        return NULL;
    }
    for (Py_ssize_t t = 0; t < g.taps; t++)
        if (offsets[t] < 0) {
            PyErr_Format(PyExc_ValueError, "argument 'offsets' must be >= 0, got %zd at %zd",
                         offsets[t], t);
            return NULL;
        }
    /* the furthest element read (the last partial vector reads VECTOR_LANES - 1 further)
     * and the furthest written */
    Py_ssize_t last_read = multiply_add(g.channels - 1, g.channel_stride, 0);
    last_read = last_read < 0 ? -1 : multiply_add(g.rows - 1, g.row_pitch, last_read);
    last_read = last_read < 0 ? -1 : multiply_add(1, reach, last_read);
    last_read = last_read < 0 ? -1 : multiply_add(1, g.cols, last_read);
    last_read = last_read < 0 ? -1 : multiply_add(1, VECTOR_LANES - 2, last_read);
    Py_ssize_t rows_end = multiply_add(1, g.first_row, g.rows);
    Py_ssize_t last_write = multiply_add(g.channels - 1, g.out_plane, 0);
    last_write = last_write < 0 || rows_end < 0 ? -1 : multiply_add(rows_end, g.cols,
                                                                    last_write);
    if (last_read < 0 || last_write < 0) {
        PyErr_SetString(PyExc_OverflowError, "shifted_sums: sizes overflow");
        return NULL;
    }
    BufferArg b[3] = {
        {.object = source_object, .name = "source", .role = INPUT},
        {.object = out_object, .name = "out", .role = OUTPUT},
        {.object = bias_object, .name = "bias", .role = OPTIONAL_INPUT},
    };
    if (hold_buffers(b, 3) != 0) return NULL;
    PyObject *result = NULL;
    if (check_count(&b[0].view, last_read + 1, "source") == 0 &&
        check_count(&b[1].view, last_write, "out") == 0 &&
        check_optional(&b[2], g.channels) == 0) {
        Py_BEGIN_ALLOW_THREADS
        shifted_sums_loop(data_of(&b[0]), data_of(&b[1]), data_of(&b[2]), offsets, &g);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    release_buffers(b, 3);
    return result;
}

/* -- im2col for one 2-d image -----------------------------------------------------------------
 * columns[(c * KH + i) * KW + j, oh * OW + ow] = x[c, oh * SH + i * DH - PH, ow * SW + j * DW - PW]
 * (0 outside the image; PH, PW the padding before, whatever comes after): each (channel,
 * tap) row is OH runs of OW values; with stride 1 a run is one memcpy between its zero
 * margins. No padded copy of the input is made; every read is inside the image by
 * construction (the runs' [lo, hi) and the row test). */
MULTIVERSIONED
static void im2col_loop(const float *x, float *columns, Py_ssize_t channels, Py_ssize_t height,
                        Py_ssize_t width, const Py_ssize_t *k, const Py_ssize_t *stride,
                        const Py_ssize_t *pad, const Py_ssize_t *dilation, Py_ssize_t out_h,
                        Py_ssize_t out_w) {
    float *row = columns;
    for (Py_ssize_t c = 0; c < channels; c++)
        for (Py_ssize_t i = 0; i < k[0]; i++)
            for (Py_ssize_t j = 0; j < k[1]; j++) {
                const Py_ssize_t column0 = j * dilation[1] - pad[1];
                /* the outputs whose input column lies inside: [lo, hi) */
                Py_ssize_t lo = column0 >= 0 ? 0 : (-column0 + stride[1] - 1) / stride[1];
                Py_ssize_t hi = width - column0 > 0 ? (width - column0 + stride[1] - 1) / stride[1]
                                                    : 0;
                hi = hi < out_w ? hi : out_w;
                lo = lo < hi ? lo : hi;
                for (Py_ssize_t oh = 0; oh < out_h; oh++, row += out_w) {
                    Py_ssize_t y = oh * stride[0] + i * dilation[0] - pad[0];
                    if (y < 0 || y >= height) {
                        memset(row, 0, (size_t)out_w * sizeof(float));
                        continue;
                    }
                    const float *line = x + (c * height + y) * width; /* the image row */
                    if (lo) memset(row, 0, (size_t)lo * sizeof(float));
                    if (stride[1] == 1 && hi > lo)
                        memcpy(row + lo, line + column0 + lo, (size_t)(hi - lo) * sizeof(float));
                    else
                        for (Py_ssize_t ow = lo; ow < hi; ow++)
                            row[ow] = line[column0 + ow * stride[1]];
                    if (hi < out_w) memset(row + hi, 0, (size_t)(out_w - hi) * sizeof(float));
                }
            }
}

static PyObject *py_im2col(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *x_object, *out_object;
    Py_ssize_t channels, height, width, k[2], stride[2], pad[2], dilation[2], out_h, out_w;
    if (!PyArg_ParseTuple(args, "OO(nnn)(nn)(nn)(nn)(nn)(nn)", &x_object, &out_object,
                          &channels, &height, &width, &k[0], &k[1], &stride[0], &stride[1],
                          &pad[0], &pad[1], &dilation[0], &dilation[1], &out_h, &out_w))
        return NULL;
    if (channels < 0 || height < 0 || width < 0 || out_h < 0 || out_w < 0 || k[0] < 1 ||
        k[1] < 1 || stride[0] < 1 || stride[1] < 1 || pad[0] < 0 || pad[1] < 0 ||
        dilation[0] < 1 || dilation[1] < 1) {
        PyErr_SetString(PyExc_ValueError, "im2col: bad geometry");
        return NULL;
    }
    Py_ssize_t x_count = product4(channels, height, width, 1);
    Py_ssize_t rows = product4(channels, k[0], k[1], 1), plane = product4(out_h, out_w, 1, 1);
    Py_ssize_t out_count = rows < 0 || plane < 0 ? -1 : product4(rows, plane, 1, 1);
    Py_ssize_t reach_h = input_span(out_h, stride[0], dilation[0], k[0]);
    Py_ssize_t reach_w = input_span(out_w, stride[1], dilation[1], k[1]);
    if (x_count < 0 || out_count < 0 || reach_h < 0 || reach_w < 0) { /* (index overflow) */
        PyErr_SetString(PyExc_OverflowError, "im2col: sizes overflow");
        return NULL;
    }
    Py_buffer x, out;
    if (get_float_buffer(x_object, &x, 0, "x") != 0) return NULL;
    if (get_float_buffer(out_object, &out, 1, "out") != 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    PyObject *result = NULL;
    if (check_count(&x, x_count, "x") == 0 && check_count(&out, out_count, "out") == 0) {
        Py_BEGIN_ALLOW_THREADS
        im2col_loop(x.buf, out.buf, channels, height, width, k, stride, pad, dilation, out_h,
                    out_w);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&x);
    return result;
}

static PyObject *py_tile_taps(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *taps_object, *bias_object, *out_object;
    TileGeometry g;
    if (!PyArg_ParseTuple(args, "OOO(nnn)(nnn)", &taps_object, &bias_object, &out_object,
                          &g.channels, &g.kernel_h, &g.kernel_w, &g.batch, &g.height,
                          &g.width))
        return NULL;
    if (g.channels <= 0 || g.kernel_h <= 0 || g.kernel_w <= 0 || g.batch <= 0 ||
        g.height <= 0 || g.width <= 0) {
        PyErr_SetString(PyExc_ValueError, "tile_taps: every size must be > 0");
        return NULL;
    }
    Py_ssize_t per_image = product4(g.channels, g.kernel_h, g.kernel_w, g.height);
    Py_ssize_t count = per_image < 0 ? -1 : product4(per_image, g.width, g.batch, 1);
    if (count < 0) {
        PyErr_SetString(PyExc_OverflowError, "tile_taps: sizes overflow");
        return NULL;
    }
    BufferArg b[3] = {
        {.object = taps_object, .name = "taps", .role = INPUT},
        {.object = bias_object, .name = "bias", .role = OPTIONAL_INPUT},
        {.object = out_object, .name = "out", .role = OUTPUT},
    };
    if (hold_buffers(b, 3) != 0) return NULL;
    PyObject *result = NULL;
    if (check_count(&b[0].view, count, "taps") == 0 && check_count(&b[2].view, count, "out") == 0 &&
        check_optional(&b[1], g.channels) == 0) {
        Py_BEGIN_ALLOW_THREADS
        tile_taps_loop(data_of(&b[0]), data_of(&b[1]), data_of(&b[2]), &g);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    release_buffers(b, 3);
    return result;
}

static PyObject *py_max_pool2d(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *x_object, *out_object;
    MaxPool2d p;
    if (!PyArg_ParseTuple(args, "OO(nnn)(nn)(nn)(nn)(nn)", &x_object, &out_object, &p.planes,
                          &p.height, &p.width, &p.kernel_h, &p.kernel_w, &p.stride_h,
                          &p.stride_w, &p.pad_top, &p.pad_left, &p.out_h, &p.out_w))
        return NULL;
    /* every read is guarded by the row and column ranges: any positive geometry is safe */
    if (p.planes < 0 || p.height <= 0 || p.width <= 0 || p.kernel_h <= 0 || p.kernel_w <= 0 ||
        p.stride_h <= 0 || p.stride_w <= 0 || p.pad_top < 0 || p.pad_left < 0 ||
        p.out_h <= 0 || p.out_w <= 0) {
        PyErr_SetString(PyExc_ValueError, "max_pool2d: sizes, kernel, stride and output size "
                        "must be > 0, planes and padding >= 0");
        return NULL;
    }
    Py_ssize_t x_count = product4(p.planes, p.height, p.width, 1);
    Py_ssize_t out_count = product4(p.planes, p.out_h, p.out_w, 1);
    double reach = ((double)p.out_h * p.stride_h + p.kernel_h) +
                   ((double)p.out_w * p.stride_w + p.kernel_w);
    if (x_count < 0 || out_count < 0 || reach > 1e15) {
        PyErr_SetString(PyExc_OverflowError, "max_pool2d: sizes overflow");
        return NULL;
    }
    BufferArg b[2] = {
        {.object = x_object, .name = "x", .role = INPUT},
        {.object = out_object, .name = "out", .role = OUTPUT},
    };
    if (hold_buffers(b, 2) != 0) return NULL;
    PyObject *result = NULL;
    if (check_count(&b[0].view, x_count, "x") == 0 &&
        check_count(&b[1].view, out_count, "out") == 0) {
        p.x = data_of(&b[0]);
        p.out = data_of(&b[1]);
        double work = (double)out_count * (double)(p.kernel_h * p.kernel_w);
        Py_ssize_t tasks = work < CONV_SERIAL_WORK ? 1 : 4 * (Py_ssize_t)pool_threads();
        if (tasks > p.planes) tasks = p.planes > 0 ? p.planes : 1;
        p.per_task = (p.planes + tasks - 1) / tasks;
        if (p.per_task < 1) p.per_task = 1;
        Py_BEGIN_ALLOW_THREADS
        pool_run((p.planes + p.per_task - 1) / p.per_task, max_pool_task, &p);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    release_buffers(b, 2);
    return result;
}

static PyObject *py_masked_softmax(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *x_object, *mask_object, *out_object;
    MaskedSoftmax m;
    double scale;
    if (!PyArg_ParseTuple(args, "OOO(nnnn)(nn)d", &x_object, &mask_object, &out_object,
                          &m.batch, &m.channels, &m.rows, &m.length, &m.mask_batch,
                          &m.mask_channels, &scale))
        return NULL;
    if (m.batch <= 0 || m.channels <= 0 || m.rows <= 0 || m.length <= 0 ||
        (m.mask_batch != 1 && m.mask_batch != m.batch) ||
        (m.mask_channels != 1 && m.mask_channels != m.channels)) {
        PyErr_SetString(PyExc_ValueError, "masked_softmax: sizes must be > 0, the mask's "
                        "first two dims 1 or x's");
        return NULL;
    }
    m.scale = (float)scale;
    Py_ssize_t count = product4(m.batch, m.channels, m.rows, m.length);
    Py_ssize_t mask_count = product4(m.mask_batch, m.mask_channels, m.rows, m.length);
    if (count < 0 || mask_count < 0) {
        PyErr_SetString(PyExc_OverflowError, "masked_softmax: sizes overflow");
        return NULL;
    }
    BufferArg b[3] = {
        {.object = x_object, .name = "x", .role = INPUT},
        {.object = mask_object, .name = "mask", .role = BOOL_INPUT},
        {.object = out_object, .name = "out", .role = OUTPUT},
    };
    if (hold_buffers(b, 3) != 0) return NULL;
    PyObject *result = NULL;
    if (check_count(&b[0].view, count, "x") != 0 || check_count(&b[2].view, count, "out") != 0) {
        /* the exception is set */
    } else if (b[1].view.len < mask_count) {
        PyErr_Format(PyExc_ValueError, "argument 'mask' holds %zd values, %zd needed",
                     b[1].view.len, mask_count);
    } else {
        Py_BEGIN_ALLOW_THREADS
        masked_softmax_loop(data_of(&b[0]), data_of(&b[1]), data_of(&b[2]), &m);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    release_buffers(b, 3);
    return result;
}

/* tree_leaves(rows, slots, leaves, kinds, out, (count, width, trees, steps)): the walk of
 * host_ml's compiled forest (see "tree ensembles" above) */
static PyObject *py_tree_leaves(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *rows_object, *slots_object, *leaves_object, *kinds_object, *out_object;
    TreeWalk w = {0};
    if (!PyArg_ParseTuple(args, "OOOOO(nnnn)", &rows_object, &slots_object, &leaves_object,
                          &kinds_object, &out_object, &w.count, &w.width, &w.trees, &w.steps))
        return NULL;
    if (w.count < 0 || w.width <= 0 || w.width > INT32_MAX || w.trees < 0 || w.steps < 0) {
        PyErr_Format(PyExc_ValueError, "tree_leaves: rows %zd, width %zd, trees %zd, steps "
                     "%zd: the width must be in [1, 2^31), the others >= 0", w.count, w.width,
                     w.trees, w.steps);
        return NULL;
    }
    Py_ssize_t row_values = multiply_add(w.count, w.width, 0);
    w.lanes = multiply_add(w.count, w.trees, 0);
    if (row_values < 0 || w.lanes < 0 || w.lanes > PY_SSIZE_T_MAX / TREE_FAILURES) {
        PyErr_SetString(PyExc_OverflowError, "tree_leaves: sizes overflow");
        return NULL;
    }
    Py_buffer rows, slots, leaves, kinds, out;
    Py_buffer *held[5];
    int holding = 0;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(rows_object, &rows, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
        return NULL;
    held[holding++] = &rows;
    const char *format = rows.format != NULL ? rows.format : "B";
    w.double_type = rows.itemsize == 8 && strcmp(format, "d") == 0;
    if (!w.double_type && !(rows.itemsize == 4 && strcmp(format, "f") == 0)) {
        PyErr_Format(PyExc_TypeError, "argument 'rows' must be a float32 or float64 buffer "
                     "(format 'f' or 'd'), got format '%s'", format);
        goto done;
    }
    if (typed_buffer(slots_object, &slots, 0, "slots", "i", 4, "int32") != 0) goto done;
    held[holding++] = &slots;
    if (typed_buffer(leaves_object, &leaves, 0, "leaves", "i", 4, "int32") != 0) goto done;
    held[holding++] = &leaves;
    if (kinds_object != Py_None) {
        if (typed_buffer(kinds_object, &kinds, 0, "kinds", "b", 1, "int8") != 0) goto done;
        held[holding++] = &kinds;
    }
    if (PyObject_GetBuffer(out_object, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                           PyBUF_WRITABLE) != 0)
        goto done;
    held[holding++] = &out;
    format = out.format != NULL ? out.format : "B";
    if (out.itemsize != 8 || (strcmp(format, "l") != 0 && strcmp(format, "q") != 0)) {
        PyErr_Format(PyExc_TypeError, "argument 'out' must be an int64 buffer (format 'l' or "
                     "'q'), got format '%s'", format);
        goto done;
    }
    Py_ssize_t words = (Py_ssize_t)(w.double_type ? sizeof(TreeSlotDouble)
                                                  : sizeof(TreeSlotFloat)) / 4;
    w.slot_count = slots.len / 4 / words;
    if (w.slot_count * words != slots.len / 4 || w.slot_count > INT32_MAX ||
        (uintptr_t)slots.buf % (w.double_type ? _Alignof(TreeSlotDouble) : 4) != 0) {
        PyErr_Format(PyExc_ValueError, "argument 'slots' holds %zd int32 values; it must be "
                     "whole %s slots of %zd values (at most 2^31 - 1, aligned to their "
                     "bound)", slots.len / 4, w.double_type ? "float64" : "float32", words);
    } else if (w.trees > w.slot_count) {
        PyErr_Format(PyExc_ValueError, "tree_leaves: %zd trees but %zd slots (the first "
                     "slots are the roots)", w.trees, w.slot_count);
    } else if (leaves.len / 4 != w.slot_count) {
        PyErr_Format(PyExc_ValueError, "argument 'leaves' holds %zd values; it must hold one "
                     "per slot (%zd)", leaves.len / 4, w.slot_count);
    } else if (kinds_object != Py_None && kinds.len != w.slot_count) {
        PyErr_Format(PyExc_ValueError, "argument 'kinds' holds %zd values; it must hold one "
                     "per slot (%zd)", kinds.len, w.slot_count);
    } else if (rows.len / rows.itemsize < row_values) {
        PyErr_Format(PyExc_ValueError, "argument 'rows' holds %zd values, %zd needed (%zd "
                     "rows of %zd)", rows.len / rows.itemsize, row_values, w.count, w.width);
    } else if (out.len / 8 < w.lanes) {
        PyErr_Format(PyExc_ValueError, "argument 'out' holds %zd int64 values, %zd needed "
                     "(%zd rows x %zd trees)", out.len / 8, w.lanes, w.count, w.trees);
    } else {
        w.rows = rows.buf;
        w.slots = slots.buf;
        w.leaves = leaves.buf;
        w.kinds = kinds_object != Py_None ? kinds.buf : NULL;
        w.out = out.buf;
        atomic_init(&w.failure, PY_SSIZE_T_MAX);
        Py_ssize_t tasks = 1, groups = (w.lanes + TREE_GROUP - 1) / TREE_GROUP;
        if ((double)w.lanes * (double)(w.steps + 1) >= TREE_SERIAL_STEPS && pool_threads() > 1)
            tasks = TREE_TASKS_PER_THREAD * (Py_ssize_t)pool_threads();
        tasks = tasks < groups ? tasks : groups;
        w.lanes_per_task = tasks > 0 ? (groups + tasks - 1) / tasks * TREE_GROUP : 1;
        tasks = (w.lanes + w.lanes_per_task - 1) / w.lanes_per_task;
        Py_BEGIN_ALLOW_THREADS
        if (tasks == 1)
            tree_walk_task(&w, 0);
        else if (tasks > 1)
            pool_run(tasks, tree_walk_task, &w);
        Py_END_ALLOW_THREADS
        Py_ssize_t failure = atomic_load(&w.failure);
        if (failure == PY_SSIZE_T_MAX) {
            result = Py_NewRef(Py_None);
        } else {
            Py_ssize_t position = failure / TREE_FAILURES; /* row * trees + tree */
            if (failure % TREE_FAILURES == TREE_OUT_OF_RANGE)
                PyErr_Format(PyExc_ValueError, "tree_leaves: tree %zd, row %zd: a slot reads "
                             "a column out of [0, %zd) or leads out of [0, %zd) slots",
                             position % w.trees, position / w.trees, w.width, w.slot_count);
            else
                PyErr_Format(PyExc_ValueError, "tree_leaves: tree %zd, row %zd is at no leaf "
                             "after %zd steps (a cycle, or a forest deeper than 'steps')",
                             position % w.trees, position / w.trees, w.steps);
        }
    }
done:
    while (holding > 0) PyBuffer_Release(held[--holding]);
    return result;
}

static PyMethodDef methods[] = {
    {"gelu_erf", py_gelu_erf, METH_VARARGS,
     "gelu_erf(x, out): GELU's erf form of float32 x into out (may be x)."},
    {"hardswish", py_hardswish, METH_VARARGS,
     "hardswish(x, out): x * clip(x / 6 + 1/2, 0, 1) of float32 x into out (may be x)."},
    {"convert_half", py_convert_half, METH_VARARGS,
     "convert_half(half, single, to_single): float16 <-> float32 between two C-contiguous "
     "buffers of as many values (to_single: half -> single), IEEE round-to-nearest-even as "
     "numpy; returns False, writing nothing, where the CPU has no F16C."},
    {"im2col", py_im2col, METH_VARARGS,
     "im2col(x, out, (C, H, W), (KH, KW), (SH, SW), (PH, PW), (DH, DW), (OH, OW)): the "
     "columns of one float32 image x (C, H, W) into out (C * KH * KW, OH * OW), zero where a "
     "tap falls outside the image (PH, PW: the padding before)."},
    {"tanh", py_tanh, METH_VARARGS,
     "tanh(x, out): tanh of float32 x into out (may be x), within 5 ulp."},
    {"exp", py_exp, METH_VARARGS,
     "exp(x, out): exp of float32 x into out (may be x), within 2 ulp (0 where the result "
     "is below float32's normal range)."},
    {"erf", py_erf, METH_VARARGS,
     "erf(x, out): erf of float32 x into out (may be x), within 3 ulp."},
    {"sigmoid", py_sigmoid, METH_VARARGS,
     "sigmoid(x, out): 1 / (1 + exp(-x)) of float32 x into out (may be x)."},
    {"clamp", py_clamp, METH_VARARGS,
     "clamp(x, out, low, high): min(max(x, low), high) of float32 x into out (NaN stays "
     "NaN), on the pool"},
    {"leaky_relu", py_leaky_relu, METH_VARARGS,
     "leaky_relu(x, out, slope): x where x > 0, else slope * x, of float32 x into out "
     "(may be x)."},
    {"silu", py_silu, METH_VARARGS,
     "silu(x, out): x * sigmoid(x) of float32 x into out (may be x)."},
    {"softmax_rows", py_softmax_rows, METH_VARARGS,
     "softmax_rows(x, out, length): softmax of each contiguous row of float32 x into out."},
    {"masked_softmax", py_masked_softmax, METH_VARARGS,
     "masked_softmax(x, mask, out, (B, C, S1, S2), (mask_b, mask_c), scale): softmax over the "
     "last dim of scale * x, positions where the bool mask is true set to -10000 first "
     "(aclnnScaledMaskedSoftmax; mask_b/mask_c 1 or B/C; out may be x itself)."},
    {"row_sums", py_row_sums, METH_VARARGS,
     "row_sums(x, out, length): the sum of each contiguous float32 row of x, accumulated in "
     "float64, into the float64 buffer out."},
    {"shifted_sums", py_shifted_sums, METH_VARARGS,
     "shifted_sums(source, out, bias, offsets, (channels, channel_stride), (rows, row_pitch), "
     "(cols, out_plane, first_row)): out[c, first_row + r, j] = bias[c] + sum over t of "
     "source[c * channel_stride + r * row_pitch + offsets[t] + j] (float32; source holds "
     "15 readable values past the last one summed)."},
    {"add_layer_norm_rows", py_add_layer_norm_rows, METH_VARARGS,
     "add_layer_norm_rows(x1, x2, bias, gamma, beta, y, x_out, mean, rstd, length, eps): "
     "x = x1 + x2 (+ bias: one row or one per row, or None) into x_out (or None), its "
     "LayerNorm over rows of length into y (float32; y and x_out apart from the inputs or "
     "the very same), row means and rstds into mean and rstd."},
    {"max_pool2d", py_max_pool2d, METH_VARARGS,
     "max_pool2d(x, out, (planes, H, W), (KH, KW), stride, (pad_top, pad_left), (OH, OW)): "
     "float32 max pooling of each H x W plane, positions outside the plane counting as -inf "
     "(any NaN in a window gives NaN, as numpy.maximum)."},
    {"tile_taps", py_tile_taps, METH_VARARGS,
     "tile_taps(taps, bias, out, (C, KH, KW), (N, H, W)): out[n, c, i*KH + a, j*KW + b] = "
     "taps[c, a*KW + b, n, i, j] + bias[c] (float32; bias C values or None): a transposed "
     "convolution whose stride equals its kernel."},
    {"layer_norm_rows", py_layer_norm_rows, METH_VARARGS,
     "layer_norm_rows(x, weight, bias, out, mean, rstd, length, eps): LayerNorm of each "
     "contiguous float32 row of x into out (weight and bias: length values or None), the "
     "row means and reciprocal standard deviations into mean and rstd."},
    {"conv2d_direct", py_conv2d_direct, METH_VARARGS,
     "conv2d_direct(x, weight, bias, out, (N, C, H, W), (C_out, groups), (KH, KW), stride, "
     "(pad_top, pad_left), dilation, (OH, OW), activation=0, alpha=0): NCHW float32 grouped "
     "convolution (weight C_out x C/groups x KH x KW, bias C_out or None, then the "
     "activation: conv2d_gemm's codes) summing taps directly; for depthwise and few-channel "
     "convolutions."},
    {"lstm_sequence", py_lstm_sequence, METH_VARARGS,
     "lstm_sequence(projected, recurrent, h, c, y, gates, (T, B, H), (y_row, y_offset), "
     "reverse, transposed): an LSTM over T steps (PyTorch's gate order i, f, g, o): "
     "projected (T, B, 4H) holds x_t @ W^T plus both biases, recurrent is R (4H, H) or, "
     "transposed, R^T (H, 4H), h and c (B, H) the state (initial in, final out), "
     "y (T, B, y_row) gets h_t at column y_offset; gates (B, 4H) is scratch. Every buffer "
     "float32 and apart from the others."},
    {"lstm_sequences", py_lstm_sequences, METH_O,
     "lstm_sequences([args, ...]): lstm_sequence of each argument tuple, all at once on the "
     "pool (independent recurrences with disjoint outputs: a layer's two directions)."},
    {"gru_sequences", py_gru_sequences, METH_O,
     "gru_sequences([args, ...]): gru_sequence of each argument tuple, all at once on the "
     "pool (independent recurrences with disjoint outputs: a layer's two directions)."},
    {"gru_sequence", py_gru_sequence, METH_VARARGS,
     "gru_sequence(projected, recurrent, hidden_bias, h, y, gates, (T, B, H), (y_row, "
     "y_offset), reverse, transposed): a GRU over T steps (PyTorch's gate order r, z, n, its "
     "reset applied after the product): projected (T, B, 3H) holds x_t @ W^T + b_ih, "
     "recurrent is R (3H, H) or, transposed, R^T (H, 3H), hidden_bias b_hh (3H) or None, h "
     "(B, H) the state (initial in, final out), y (T, B, y_row) gets h_t at column "
     "y_offset; gates (B, 3H) is scratch. Every buffer float32 and apart from the others."},
    {"int8_gemm", py_int8_gemm, METH_VARARGS,
     "int8_gemm(a, a_zero, quads, column_sums, out, (M, K, N)): out (M, N) float32 = the "
     "exact int32 (a - a_zero) @ B, converted; a (M, 4 * ceil(K / 4)) uint8 (zeros past K), "
     "B as column blocks of 64, each (ceil(K / 4), 64, 4) int8, with 64 column sums per "
     "block (int32); AVX-512 VNNI only (dq_lstm_vnni)."},
    {"dq_lstm_sequences", py_dq_lstm_sequences, METH_O,
     "dq_lstm_sequences([args, ...]): dq_lstm_sequence of each argument tuple, all at once on "
     "the pool, one per thread (independent directions with disjoint outputs)."},
    {"dq_lstm_vnni", py_dq_lstm_vnni, METH_NOARGS,
     "dq_lstm_vnni() -> bool: whether dq_lstm_sequence takes quads (AVX-512 VNNI here)"},
    {"dq_lstm_sequence", py_dq_lstm_sequence, METH_VARARGS,
     "dq_lstm_sequence(gates_x, pairs, r_scale, bias, h, c, y, (T, B, H), clip, reverse"
     "[, quads, column_sums]): "
     "onnxruntime's DynamicQuantizeLSTM steps (default activations, no peepholes, full "
     "sequences): gates_x (T, B, 4H) float32 in processing order, pairs (ceil(H / 2), 4H, 2) "
     "int16, or int8 where every value fits (R minus its zero point, rows 2p and 2p + 1 "
     "interleaved, the columns in blocks of 16 hidden units, each block its units' columns of "
     "gate i, o, f, then c), r_scale 1 or 4H float32, bias 4H float32 or None, h and c "
     "(B, H) float32 (initial in, final out), y (T, B, H) float32 or None; with an int8 R "
     "on an AVX-512 VNNI CPU (dq_lstm_vnni), also quads (per unit block, (ceil(H / 4), 64, "
     "4) int8) and column_sums (per block, 64 int32): the same sums by vpdpbusd."},
    {"tree_leaves", py_tree_leaves, METH_VARARGS,
     "tree_leaves(rows, slots, leaves, kinds, out, (N, W, T, steps)): the leaf rank each tree "
     "reaches for each row, into out (N, T) int64: rows (N, W) float32 or float64; slots "
     "int32, per slot (bound, column, next) as openacl.model.host_ml lays them out (3 int32 "
     "values for float32, 4 for float64: the bound's bits first); slots 0 .. T - 1 the roots; "
     "a step moves to next + (x[column] <= bound), or kinds' RAW comparison (int8 per slot or "
     "None); leaves int32 per slot, its leaf rank or -1. At most 'steps' steps a lane; a slot "
     "out of range or a lane at no leaf then is a ValueError."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "openacl._native",
    .m_doc = "Fused float32 kernels for the CPU backend (optional; numpy is the fallback).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddFunctions(created, native_gemm_methods) != 0)
        Py_CLEAR(created);
    return created;
}
