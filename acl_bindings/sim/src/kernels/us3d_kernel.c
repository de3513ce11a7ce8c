/*
 * us3d_kernel.c - operator core of the simulated aclnnUpsampleNearestExact3dBackward.
 * See us3d_kernel.h for the interface.  Facts cited from docs/cann-abi.md.
 *
 * Build: cc -O2 -std=gnu11 -fPIC -c us3d_kernel.c   (no libm needed; do not use -ffast-math:
 * the window formula relies on exact IEEE float32 rounding).
 */
#include "us3d_kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ========================================================================================== */
/* float16 / bfloat16 <-> float32                                                              */
/* ========================================================================================== */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float f16_to_f32(uint16_t h) {
    /* Branch-free (masks only), so loops over it vectorise. */
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t a = h & 0x7fffu;
    /* normal, inf and NaN: shift the fields into place and re-bias the exponent (15 -> 127, or
       31 -> 255 for inf/NaN; a NaN keeps its payload) */
    uint32_t nb = (a << 13) + (a >= 0x7c00u ? (224u << 23) : (112u << 23));
    /* zero and subnormal: a * 2^-24, exact (a normal float32, or 0) */
    float sub = (float)(int32_t)a * 5.9604644775390625e-8f;
    uint32_t small = 0u - (uint32_t)(a < 0x400u);                /* all ones for zero/subnormal */
    return bits_f32((f32_bits(sub) & small) | (nb & ~small) | sign);
}

static inline uint16_t f32_to_f16(float f) {
    /* Round to nearest even, branch-free (every case is computed, then selected with masks), so
       loops over it vectorise. */
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    /* normal half (|f| >= 2^-14): re-bias the exponent (127 -> 15), round at bit 13 (a carry into
       the exponent is correct) */
    uint32_t nrm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    /* subnormal half or zero: |f| + 0.5f is rounded by the float32 adder to a multiple of 2^-24,
       the half subnormal step, ties to even; the low bits then hold the half's mantissa (0x400,
       the smallest normal, when it rounds up that far) */
    float shifted = bits_f32(a) + 0.5f;   /* (float32 arithmetic: SSE or NEON, no excess precision) */
    uint32_t sub = f32_bits(shifted) - 0x3f000000u;
    uint32_t m_sub = 0u - (uint32_t)(a < 0x38800000u);
    uint32_t m_inf = 0u - (uint32_t)(a >= 0x477ff000u);          /* >= 65520 rounds to inf (and inf) */
    uint32_t m_nan = 0u - (uint32_t)(a > 0x7f800000u);           /* NaN -> quiet NaN, top payload bits */
    uint32_t h = (sub & m_sub) | (nrm & ~m_sub);
    h = (0x7c00u & m_inf) | (h & ~m_inf);
    h = ((0x7e00u | ((a >> 13) & 0x3ffu)) & m_nan) | (h & ~m_nan);
    return (uint16_t)(sign | h);
}

static inline float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;         /* RNE; overflow carries to inf */
    uint32_t q = (u >> 16) | 0x0040u;                            /* NaN -> quiet NaN */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

float us3d_f16_to_f32(uint16_t h) { return f16_to_f32(h); }
uint16_t us3d_f32_to_f16(float f) { return f32_to_f16(f); }
float us3d_bf16_to_f32(uint16_t b) { return bf16_to_f32(b); }
uint16_t us3d_f32_to_bf16(float f) { return f32_to_bf16(f); }

/* ========================================================================================== */
/* Scales and windows (cann-abi.md §5.2, §5.3, §6.5)                                           */
/* ========================================================================================== */

void us3d_resolve_scales(double sd, double sh, double sw, const int64_t out3[3],
                         const int64_t in3[3], float s[3]) {
    /* "> 0" is false for NaN, so a NaN user scale selects the size ratio (as in the host code). */
    if (sd > 0 && sh > 0 && sw > 0) {
        s[0] = (float)sd; s[1] = (float)sh; s[2] = (float)sw;
        return;
    }
    for (int k = 0; k < 3; k++) {
        if (in3[k] <= 0) { s[k] = 0.0f; continue; }
        volatile float num = (float)out3[k];
        volatile float den = (float)in3[k];
        s[k] = num / den;                                  /* float32 division */
    }
}

int64_t us3d_lo(int64_t i, float s, int64_t O) {
    if (O <= 0) return 0;
    /* The volatile store forces the product to be rounded to float32 on its own (no FMA
       contraction, no excess precision): the Atlas A2/A3 kernel does Muls then Adds. */
    volatile float p = (float)i * s;
    float x = p - 0.5f;
    if (!(x > 0.0f)) return 0;                             /* ceil(x) <= 0, or NaN */
    if (x >= 9.0e18f) return O;
    int64_t t = (int64_t)x;                                /* trunc; exact in range */
    if ((float)t < x) t++;                                 /* ceil */
    return t < O ? t : O;
}

void us3d_lo_table(float s, int64_t I, int64_t O, int64_t *lo) {
    for (int64_t i = 0; i <= I; i++) lo[i] = us3d_lo(i, s, O);
}

/* ========================================================================================== */
/* Workspace                                                                                   */
/* ========================================================================================== */

#define US3D_ALIGN 64u
/* Channels handled per block in channels-last mode (bounds the row buffers). */
#define US3D_CBLOCK 1024

static int mul_u64(uint64_t a, uint64_t b, uint64_t *r) { return __builtin_mul_overflow(a, b, r); }

static uint64_t round_up64(uint64_t x) { return (x + 63u) & ~(uint64_t)63u; }

/* Offsets (relative to the aligned base) of each region; returns 0 on overflow. */
typedef struct { uint64_t lod, loh, low, buf, buflen, bufstep, total; } ws_layout;

/* Whether the float32 byte count of a tensor of these sizes fits in 64 bits. */
static int tensor_bytes_ok(const int64_t s[5]) {
    uint64_t t = 4u;
    for (int k = 0; k < 5; k++)
        if (mul_u64(t, (uint64_t)s[k], &t)) return 0;
    return 1;
}

static int compute_layout(const int64_t go[5], const int64_t gi[5], ws_layout *L) {
    for (int k = 0; k < 5; k++) if (go[k] < 0 || gi[k] < 0) return 0;
    uint64_t C = (uint64_t)gi[1];
    uint64_t iD = (uint64_t)gi[2], iH = (uint64_t)gi[3], iW = (uint64_t)gi[4];
    uint64_t off = 0;
    /* Sizes are bounded by 2^56 so the small tables below cannot overflow, and both tensors'
       float32 byte counts must fit in 64 bits (a tensor that large cannot exist). */
    const uint64_t lim = (uint64_t)1 << 56;
    if (iD > lim || iH > lim || iW > lim) return 0;
    if (!tensor_bytes_ok(go) || !tensor_bytes_ok(gi)) return 0;
    L->lod = off; off = round_up64(off + (iD + 1) * 8u);
    L->loh = off; off = round_up64(off + (iH + 1) * 8u);
    L->low = off; off = round_up64(off + (iW + 1) * 8u);
    /* four float32 row buffers of max(iW, oW, min(C, US3D_CBLOCK)) elements */
    uint64_t cb = C < US3D_CBLOCK ? C : US3D_CBLOCK, oW = (uint64_t)go[4];
    if (oW > lim) return 0;
    L->buflen = iW > cb ? iW : cb;
    if (oW > L->buflen) L->buflen = oW;
    L->bufstep = round_up64(L->buflen * 4u);
    L->buf = off;
    off += 4u * L->bufstep;
    L->total = off + US3D_ALIGN;   /* + alignment slack */
    return 1;
}

uint64_t us3d_workspace_bytes(const int64_t go_size[5], const int64_t gi_size[5]) {
    ws_layout L;
    for (int k = 0; k < 5; k++) if (go_size[k] < 0 || gi_size[k] < 0) return UINT64_MAX;
    for (int k = 0; k < 5; k++) if (gi_size[k] == 0) return 0;
    if (!compute_layout(go_size, gi_size, &L)) return UINT64_MAX;
    return L.total;
}

/* ========================================================================================== */
/* Kernel                                                                                      */
/* ========================================================================================== */
/*
 * The result is the separable sum  D-window( H-window( W-window(gradOut) ) ): every window is
 * summed left to right starting from its first element (an empty W window contributes 0.0f to
 * the H sum, an empty D or H window gives 0).  Instead of materialising the W- and H-pass
 * intermediates for the whole tensor, the passes are fused per gradInput row: for each row the
 * W sums of each gradOut row in its H window are accumulated into an H row, and the H rows of
 * its D window into a D row, in the same order and with the same float32 operations as three
 * separate passes - so the result is bit-for-bit that of the separable algorithm, while gradOut
 * is read once and gradInput written once.
 *
 * Two traversals:
 *   row mode      (W is the vector): one gradInput row [iW] at a time, for any strides;
 *   channel mode  (C is the vector): when gradOut's C stride is 1 and C > 1 (NDHWC), one block
 *                 of up to US3D_CBLOCK channels of one gradInput position at a time, so every
 *                 inner loop runs over contiguous channels.
 */

/* The simple, fixed-length loops below are worth vectorising; the library is built with -O2,
   where GCC vectorises almost nothing, so those functions ask for more (GCC only). */
#if defined(__GNUC__) && !defined(__clang__)
#define US3D_VECTORISE __attribute__((optimize("O3")))
#else
#define US3D_VECTORISE
#endif

/* h[iw] (=|+=) W-sum of the gradOut row p (element stride sw) over [lo[iw], lo[iw+1]).
   K > 0 means lo[iw] == K*iw for every iw (integer down-factor along W).  "+=" is h = h + sum:
   the window sum is formed first, as in a separate W pass. */
#define US3D_DEF_WROW(NAME, T, LOAD)                                                              \
    __attribute__((noinline)) static void NAME##_lo(const T *restrict p, int64_t sw, const int64_t *restrict lo, int64_t iW, \
                          float *restrict h, int add) {                                           \
        for (int64_t i = 0; i < iW; i++) {                                                        \
            int64_t b = lo[i], e = lo[i + 1];                                                     \
            float acc = 0.0f;                                                                     \
            if (b < e) {                                                                          \
                const T *q = p + b * sw;                                                          \
                acc = LOAD(q[0]);                                                                 \
                for (int64_t o = 1; o < e - b; o++) acc += LOAD(q[o * sw]);                       \
            }                                                                                     \
            if (add) h[i] += acc;                                                                 \
            else h[i] = acc;                                                                      \
        }                                                                                         \
    }                                                                                             \
    US3D_VECTORISE static void NAME(const T *restrict p, int64_t sw, const int64_t *restrict lo, int64_t iW,    \
                     int64_t K, float *restrict h, int add) {                                     \
        if (K == 1 && sw == 1) {                                                                  \
            if (add) for (int64_t i = 0; i < iW; i++) h[i] += LOAD(p[i]);                         \
            else for (int64_t i = 0; i < iW; i++) h[i] = LOAD(p[i]);                              \
            return;                                                                               \
        }                                                                                         \
        if (K == 2 && sw == 1) {                                                                  \
            if (add) for (int64_t i = 0; i < iW; i++) h[i] += LOAD(p[2 * i]) + LOAD(p[2 * i + 1]); \
            else for (int64_t i = 0; i < iW; i++) h[i] = LOAD(p[2 * i]) + LOAD(p[2 * i + 1]);     \
            return;                                                                               \
        }                                                                                         \
        if (K == 3 && sw == 1) {                                                                  \
            for (int64_t i = 0; i < iW; i++) {                                                    \
                float acc = LOAD(p[3 * i]) + LOAD(p[3 * i + 1]);                                  \
                acc += LOAD(p[3 * i + 2]);                                                        \
                if (add) h[i] += acc;                                                             \
                else h[i] = acc;                                                                  \
            }                                                                                     \
            return;                                                                               \
        }                                                                                         \
        if (K > 0) {                                                                              \
            for (int64_t i = 0; i < iW; i++) {                                                    \
                const T *q = p + i * K * sw;                                                      \
                float acc = LOAD(q[0]);                                                           \
                for (int64_t o = 1; o < K; o++) acc += LOAD(q[o * sw]);                           \
                if (add) h[i] += acc;                                                             \
                else h[i] = acc;                                                                  \
            }                                                                                     \
            return;                                                                               \
        }                                                                                         \
        NAME##_lo(p, sw, lo, iW, h, add);                                                         \
    }

/* Channel mode: h[c] (=|+=) sum over ow in [b, e) of gradOut[.., ow, c0 + c], c < n; the
   gradOut block p has channel stride 1 and W stride sw; w is scratch for multi-element windows. */
#define US3D_DEF_CROW(NAME, T, LOAD)                                                              \
    US3D_VECTORISE static void NAME(const T *restrict p, int64_t sw, int64_t b, int64_t e, int64_t n,           \
                     float *restrict h, float *restrict w, int add) {                             \
        if (b >= e) {                                                                             \
            if (add) for (int64_t c = 0; c < n; c++) h[c] += 0.0f;                                \
            else memset(h, 0, (size_t)n * sizeof(float));                                        \
            return;                                                                               \
        }                                                                                         \
        const T *p0 = p + b * sw;                                                                 \
        if (e - b == 1) {                                                                         \
            if (add) for (int64_t c = 0; c < n; c++) h[c] += LOAD(p0[c]);                         \
            else for (int64_t c = 0; c < n; c++) h[c] = LOAD(p0[c]);                              \
            return;                                                                               \
        }                                                                                         \
        const T *p1 = p0 + sw;                                                                    \
        if (!add) {                                                                               \
            for (int64_t c = 0; c < n; c++) h[c] = LOAD(p0[c]) + LOAD(p1[c]);                     \
            for (int64_t o = b + 2; o < e; o++) {                                                 \
                const T *q = p + o * sw;                                                          \
                for (int64_t c = 0; c < n; c++) h[c] += LOAD(q[c]);                               \
            }                                                                                     \
            return;                                                                               \
        }                                                                                         \
        for (int64_t c = 0; c < n; c++) w[c] = LOAD(p0[c]) + LOAD(p1[c]);                         \
        for (int64_t o = b + 2; o < e; o++) {                                                     \
            const T *q = p + o * sw;                                                              \
            for (int64_t c = 0; c < n; c++) w[c] += LOAD(q[c]);                                   \
        }                                                                                         \
        for (int64_t c = 0; c < n; c++) h[c] += w[c];                                             \
    }

#define LOAD_F32(x) (x)
#define LOAD_F16(x) f16_to_f32(x)
#define LOAD_BF16(x) bf16_to_f32(x)
US3D_DEF_WROW(wrow_f32, float, LOAD_F32)
US3D_DEF_WROW(wrow_f16, uint16_t, LOAD_F16)
US3D_DEF_WROW(wrow_bf16, uint16_t, LOAD_BF16)
US3D_DEF_CROW(crow_f32, float, LOAD_F32)
US3D_DEF_CROW(crow_f16, uint16_t, LOAD_F16)
US3D_DEF_CROW(crow_bf16, uint16_t, LOAD_BF16)

/* Store one float32 row into the output with stride sw (element units); r == NULL stores zeros. */
US3D_VECTORISE static void store_row(int dtype, void *dst, int64_t sw, const float *r, int64_t n) {
    if (dtype == US3D_DT_FLOAT) {
        float *d = (float *)dst;
        if (r == NULL) {
            if (sw == 1) memset(d, 0, (size_t)n * sizeof(float));
            else for (int64_t i = 0; i < n; i++) d[i * sw] = 0.0f;
            return;
        }
        if (sw == 1) { if (d != r) memcpy(d, r, (size_t)n * sizeof(float)); return; }
        for (int64_t i = 0; i < n; i++) d[i * sw] = r[i];
        return;
    }
    uint16_t *d = (uint16_t *)dst;
    if (r == NULL) {   /* +0.0 is the all-zero bit pattern in both 16-bit formats */
        if (sw == 1) memset(d, 0, (size_t)n * sizeof(uint16_t));
        else for (int64_t i = 0; i < n; i++) d[i * sw] = 0;
        return;
    }
    if (dtype == US3D_DT_FLOAT16) {
        if (sw == 1) { for (int64_t i = 0; i < n; i++) d[i] = f32_to_f16(r[i]); return; }
        for (int64_t i = 0; i < n; i++) d[i * sw] = f32_to_f16(r[i]);
    } else {
        if (sw == 1) { for (int64_t i = 0; i < n; i++) d[i] = f32_to_bf16(r[i]); return; }
        for (int64_t i = 0; i < n; i++) d[i * sw] = f32_to_bf16(r[i]);
    }
}

/* d[i] = d[i] + h[i] */
US3D_VECTORISE static void add_row(float *restrict d, const float *restrict h, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] += h[i];
}

static int elem_size(int dtype) {
    switch (dtype) {
    case US3D_DT_FLOAT: return 4;
    case US3D_DT_FLOAT16: return 2;
    case US3D_DT_BF16: return 2;
    default: return 0;
    }
}

typedef struct {
    int dtype, es;
    const char *go; char *gi;
    const int64_t *gs, *is;
    int64_t N, C, iD, iH, iW;
    const int64_t *loD, *loH, *loW;
    float *b0, *b1, *b2, *b3;
    int go_empty;
} run_ctx;

/* Widen n contiguous 16-bit values to float32 (exact). */
US3D_VECTORISE static void widen_f16(const uint16_t *restrict p, int64_t n, float *restrict r) {
    for (int64_t i = 0; i < n; i++) r[i] = f16_to_f32(p[i]);
}
US3D_VECTORISE static void widen_bf16(const uint16_t *restrict p, int64_t n, float *restrict r) {
    for (int64_t i = 0; i < n; i++) r[i] = bf16_to_f32(p[i]);
}

/* W-sum of one gradOut row (element offset off) into h (=|+=).  A contiguous 16-bit row is
   first widened into scratch (exact), then summed by the float32 code. */
static inline void wrow(const run_ctx *x, int64_t off, int64_t K, float *h, int add) {
    const int64_t sw = x->gs[4];
    if (x->dtype == US3D_DT_FLOAT) {
        wrow_f32((const float *)x->go + off, sw, x->loW, x->iW, K, h, add);
    } else if (sw == 1) {
        const int64_t used = x->loW[x->iW];   /* elements [0, lo[iW]) of the row are summed */
        if (x->dtype == US3D_DT_FLOAT16) widen_f16((const uint16_t *)x->go + off, used, x->b3);
        else widen_bf16((const uint16_t *)x->go + off, used, x->b3);
        wrow_f32(x->b3, 1, x->loW, x->iW, K, h, add);
    } else if (x->dtype == US3D_DT_FLOAT16) {
        wrow_f16((const uint16_t *)x->go + off, sw, x->loW, x->iW, K, h, add);
    } else {
        wrow_bf16((const uint16_t *)x->go + off, sw, x->loW, x->iW, K, h, add);
    }
}

static void run_rows(const run_ctx *x) {
    const int64_t *gs = x->gs, *is = x->is;
    const int64_t iW = x->iW;
    /* K when lo[iw] == K*iw for every iw (integer down-factor along W), else 0 */
    int64_t K = x->loW[1];   /* lo[0] == 0; K*i stays <= 2*oW before the first mismatch */
    for (int64_t i = 2; i <= iW && K > 0; i++)
        if (x->loW[i] != K * i) K = 0;
    const int direct = x->dtype == US3D_DT_FLOAT && is[4] == 1;   /* accumulate in gradInput itself */
    for (int64_t n = 0; n < x->N; n++)
        for (int64_t c = 0; c < x->C; c++)
            for (int64_t id = 0; id < x->iD; id++) {
                const int64_t bd = x->loD[id], ed = x->loD[id + 1];
                for (int64_t ih = 0; ih < x->iH; ih++) {
                    const int64_t bh = x->loH[ih], eh = x->loH[ih + 1];
                    char *out = x->gi + (n * is[0] + c * is[1] + id * is[2] + ih * is[3]) * (int64_t)x->es;
                    if (x->go_empty || bd >= ed || bh >= eh) {
                        store_row(x->dtype, out, is[4], NULL, iW);
                        continue;
                    }
                    float *d = direct ? (float *)(void *)out : x->b0;
                    for (int64_t od = bd; od < ed; od++) {
                        float *h = od == bd ? d : x->b1;
                        for (int64_t oh = bh; oh < eh; oh++)
                            wrow(x, n * gs[0] + c * gs[1] + od * gs[2] + oh * gs[3], K, h, oh != bh);
                        if (od != bd) add_row(d, x->b1, iW);
                    }
                    if (!direct) store_row(x->dtype, out, is[4], d, iW);
                }
            }
}

static void run_channels(const run_ctx *x) {
    const int64_t *gs = x->gs, *is = x->is;
    const int64_t C = x->C;
    const int direct = x->dtype == US3D_DT_FLOAT && is[1] == 1;
    for (int64_t n = 0; n < x->N; n++)
        for (int64_t id = 0; id < x->iD; id++) {
            const int64_t bd = x->loD[id], ed = x->loD[id + 1];
            for (int64_t ih = 0; ih < x->iH; ih++) {
                const int64_t bh = x->loH[ih], eh = x->loH[ih + 1];
                for (int64_t iw = 0; iw < x->iW; iw++) {
                    const int64_t bw = x->loW[iw], ew = x->loW[iw + 1];
                    for (int64_t c0 = 0; c0 < C; c0 += US3D_CBLOCK) {
                        const int64_t nb = C - c0 < US3D_CBLOCK ? C - c0 : US3D_CBLOCK;
                        char *out = x->gi + (n * is[0] + c0 * is[1] + id * is[2] + ih * is[3] + iw * is[4]) *
                                                (int64_t)x->es;
                        if (x->go_empty || bd >= ed || bh >= eh) {
                            store_row(x->dtype, out, is[1], NULL, nb);
                            continue;
                        }
                        float *d = direct ? (float *)(void *)out : x->b0;
                        for (int64_t od = bd; od < ed; od++) {
                            float *h = od == bd ? d : x->b1;
                            for (int64_t oh = bh; oh < eh; oh++) {
                                const int64_t off = n * gs[0] + c0 + od * gs[2] + oh * gs[3];
                                const int add = oh != bh;
                                if (x->dtype == US3D_DT_FLOAT)
                                    crow_f32((const float *)x->go + off, gs[4], bw, ew, nb, h, x->b2, add);
                                else if (x->dtype == US3D_DT_FLOAT16)
                                    crow_f16((const uint16_t *)x->go + off, gs[4], bw, ew, nb, h, x->b2, add);
                                else
                                    crow_bf16((const uint16_t *)x->go + off, gs[4], bw, ew, nb, h, x->b2, add);
                            }
                            if (od != bd) add_row(d, x->b1, nb);
                        }
                        if (!direct) store_row(x->dtype, out, is[1], d, nb);
                    }
                }
            }
        }
}

/* 1 when sizes/strides describe a dense block (any dim order, size-1 dims ignored). */
static int dense5(const int64_t size[5], const int64_t stride[5]) {
    int order[5] = {0, 1, 2, 3, 4};
    for (int i = 1; i < 5; i++)   /* insertion sort by stride */
        for (int j = i; j > 0 && stride[order[j]] < stride[order[j - 1]]; j--) {
            int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    int64_t expect = 1;
    for (int i = 0; i < 5; i++) {
        const int k = order[i];
        if (size[k] == 1) continue;
        if (stride[k] != expect) return 0;
        expect *= size[k];
    }
    return 1;
}

static int identity_table(const int64_t *lo, int64_t I, int64_t O) {
    if (I != O) return 0;
    for (int64_t i = 0; i <= I; i++) if (lo[i] != i) return 0;
    return 1;
}

int us3d_run(const us3d_args *a) {
    if (a == NULL) return US3D_ERR_PARAM_INVALID;
    const int es = elem_size(a->dtype);
    if (es == 0) return US3D_ERR_PARAM_INVALID;
    for (int k = 0; k < 5; k++) if (a->go_size[k] < 0 || a->gi_size[k] < 0) return US3D_ERR_PARAM_INVALID;
    if (a->go_size[0] != a->gi_size[0] || a->go_size[1] != a->gi_size[1]) return US3D_ERR_PARAM_INVALID;

    const int64_t N = a->gi_size[0], C = a->gi_size[1];
    const int64_t iD = a->gi_size[2], iH = a->gi_size[3], iW = a->gi_size[4];
    const int64_t oD = a->go_size[2], oH = a->go_size[3], oW = a->go_size[4];
    if (N == 0 || C == 0 || iD == 0 || iH == 0 || iW == 0) return US3D_OK;   /* nothing to write */
    if (a->gi_data == NULL) return US3D_ERR_PARAM_INVALID;
    const int go_empty = (oD == 0 || oH == 0 || oW == 0);
    if (!go_empty && a->go_data == NULL) return US3D_ERR_PARAM_INVALID;

    ws_layout L;
    if (!compute_layout(a->go_size, a->gi_size, &L)) return US3D_ERR_PARAM_INVALID;
    if (a->workspace == NULL || a->workspace_size < L.total) return US3D_ERR_PARAM_INVALID;
    char *base = (char *)a->workspace;
    base += (US3D_ALIGN - ((uintptr_t)base % US3D_ALIGN)) % US3D_ALIGN;

    run_ctx x;
    x.dtype = a->dtype;
    x.es = es;
    x.go = (const char *)a->go_data;
    x.gi = (char *)a->gi_data;
    x.gs = a->go_stride;
    x.is = a->gi_stride;
    x.N = N; x.C = C; x.iD = iD; x.iH = iH; x.iW = iW;
    int64_t *loD = (int64_t *)(void *)(base + L.lod);
    int64_t *loH = (int64_t *)(void *)(base + L.loh);
    int64_t *loW = (int64_t *)(void *)(base + L.low);
    x.b0 = (float *)(void *)(base + L.buf);
    x.b1 = (float *)(void *)(base + L.buf + L.bufstep);
    x.b2 = (float *)(void *)(base + L.buf + 2u * L.bufstep);
    x.b3 = (float *)(void *)(base + L.buf + 3u * L.bufstep);
    x.go_empty = go_empty;

    us3d_lo_table(a->scale[0], iD, oD, loD);
    us3d_lo_table(a->scale[1], iH, oH, loH);
    us3d_lo_table(a->scale[2], iW, oW, loW);
    x.loD = loD; x.loH = loH; x.loW = loW;

    /* Identity in every dim with the same dense layout on both sides: the sum of each
       one-element window is that element, so the result is a copy (same dtype both sides). */
    if (!go_empty && identity_table(loD, iD, oD) && identity_table(loH, iH, oH) && identity_table(loW, iW, oW) &&
        memcmp(a->go_stride, a->gi_stride, 5 * sizeof(int64_t)) == 0 && dense5(a->gi_size, a->gi_stride)) {
        memmove(x.gi, x.go, (size_t)(N * C * iD * iH * iW) * (size_t)es);
        return US3D_OK;
    }

    if (a->go_stride[1] == 1 && C > 1 && a->go_stride[4] != 1) run_channels(&x);
    else run_rows(&x);
    return US3D_OK;
}

/* ========================================================================================== */
/* Phase-1 checks (cann-abi.md §5.1 step 3)                                                    */
/* ========================================================================================== */

/* Bounded appender for messages: never overflows, always NUL-terminates (when cap > 0). */
typedef struct { char *buf; size_t cap; size_t len; } msgbuf;

static void mb_printf(msgbuf *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mb_printf(msgbuf *m, const char *fmt, ...) {
    if (m->buf == NULL || m->cap == 0) return;
    if (m->len >= m->cap - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(m->buf + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (r < 0) return;
    m->len += (size_t)r;
    if (m->len > m->cap - 1) m->len = m->cap - 1;
}

static void mb_list(msgbuf *m, const int64_t *v, int64_t n) {
    mb_printf(m, "[");
    int64_t shown = n < 0 ? 0 : (n > 8 ? 8 : n);
    for (int64_t i = 0; i < shown; i++) mb_printf(m, i ? ",%lld" : "%lld", (long long)v[i]);
    if (n > 8) mb_printf(m, ",...");
    mb_printf(m, "]");
}

/* Shortest "%.*g" text (precision 6..17) that reads back as exactly v. */
static void fmt_double(char *out, size_t cap, double v) {
    for (int p = 6; p <= 17; p++) {
        snprintf(out, cap, "%.*g", p, v);
        if (strtod(out, NULL) == v) return;
    }
}

static const char *dtype_name(int dt) {
    switch (dt) {
    case US3D_DT_FLOAT: return "FLOAT";
    case US3D_DT_FLOAT16: return "FLOAT16";
    case US3D_DT_BF16: return "BF16";
    default: return "unsupported";
    }
}

int us3d_check(const us3d_tensor_meta *gradOut, const us3d_array_meta *outputSize,
               const us3d_array_meta *inputSize, double scalesD, double scalesH, double scalesW,
               const us3d_tensor_meta *gradInput, int skip_uplimit, char *msg, size_t msglen) {
    msgbuf m = {msg, msglen, 0};
    if (msg != NULL && msglen > 0) msg[0] = '\0';

    /* 3.1 CheckNotNull */
    if (gradOut == NULL || !gradOut->present) {
        mb_printf(&m, "gradOut: expected a tensor but got NULL");
        return US3D_ERR_PARAM_NULLPTR;
    }
    if (outputSize == NULL || !outputSize->present) {
        mb_printf(&m, "outputSize: expected an int array but got NULL");
        return US3D_ERR_PARAM_NULLPTR;
    }
    if (inputSize == NULL || !inputSize->present) {
        mb_printf(&m, "inputSize: expected an int array but got NULL");
        return US3D_ERR_PARAM_NULLPTR;
    }
    if (gradInput == NULL || !gradInput->present) {
        mb_printf(&m, "gradInput: expected a tensor but got NULL");
        return US3D_ERR_PARAM_NULLPTR;
    }

    /* 3.2 CheckDtypeValid */
    if (gradOut->dtype != US3D_DT_FLOAT && gradOut->dtype != US3D_DT_FLOAT16 &&
        gradOut->dtype != US3D_DT_BF16) {
        mb_printf(&m, "gradOut: dtype must be FLOAT(0), FLOAT16(1) or BF16(27) but got %d",
                  gradOut->dtype);
        return US3D_ERR_PARAM_INVALID;
    }
    if (gradInput->dtype != gradOut->dtype) {
        mb_printf(&m, "gradInput: dtype must equal gradOut's dtype %s(%d) but got %d",
                  dtype_name(gradOut->dtype), gradOut->dtype, gradInput->dtype);
        return US3D_ERR_PARAM_INVALID;
    }

    /* 3.3 CheckShape */
    if (gradOut->ndim != 5) {
        mb_printf(&m, "gradOut: expected a 5-D tensor but got %lld dims ", (long long)gradOut->ndim);
        mb_list(&m, gradOut->dims, gradOut->ndim);
        return US3D_ERR_PARAM_INVALID;
    }
    if (outputSize->len != 3) {
        mb_printf(&m, "outputSize: expected 3 elements [oD,oH,oW] but got %lld ", (long long)outputSize->len);
        mb_list(&m, outputSize->vals, outputSize->len);
        return US3D_ERR_PARAM_INVALID;
    }
    if (inputSize->len != 5) {
        mb_printf(&m, "inputSize: expected 5 elements [N,C,iD,iH,iW] but got %lld ", (long long)inputSize->len);
        mb_list(&m, inputSize->vals, inputSize->len);
        return US3D_ERR_PARAM_INVALID;
    }

    /* 3.4 CheckInputElement */
    static const char *const dn[3] = {"D", "H", "W"};
    const int64_t *ins = inputSize->vals, *outs = outputSize->vals;
    for (int k = 0; k < 3; k++)
        if (!(ins[k + 2] > 0)) {
            mb_printf(&m, "inputSize: %s (element %d) must be > 0 but got %lld; inputSize=", dn[k], k + 2,
                      (long long)ins[k + 2]);
            mb_list(&m, ins, 5);
            return US3D_ERR_PARAM_INVALID;
        }
    for (int k = 0; k < 3; k++)
        if (!(outs[k] > 0)) {
            mb_printf(&m, "outputSize: %s (element %d) must be > 0 but got %lld; outputSize=", dn[k], k,
                      (long long)outs[k]);
            mb_list(&m, outs, 3);
            return US3D_ERR_PARAM_INVALID;
        }
    {
        int ndhwc = gradOut->format == US3D_FORMAT_NDHWC;
        int64_t exp[5];
        if (ndhwc) { exp[0] = ins[0]; exp[1] = outs[0]; exp[2] = outs[1]; exp[3] = outs[2]; exp[4] = ins[1]; }
        else { exp[0] = ins[0]; exp[1] = ins[1]; exp[2] = outs[0]; exp[3] = outs[1]; exp[4] = outs[2]; }
        if (memcmp(exp, gradOut->dims, sizeof exp) != 0) {
            mb_printf(&m, "gradOut: shape must be %s = ", ndhwc ? "[N,oD,oH,oW,C] (NDHWC)" : "[N,C,oD,oH,oW]");
            mb_list(&m, exp, 5);
            mb_printf(&m, " from inputSize/outputSize but got ");
            mb_list(&m, gradOut->dims, 5);
            return US3D_ERR_PARAM_INVALID;
        }
    }
    {
        int ndhwc = gradInput->format == US3D_FORMAT_NDHWC;
        int64_t exp[5];
        if (ndhwc) { exp[0] = ins[0]; exp[1] = ins[2]; exp[2] = ins[3]; exp[3] = ins[4]; exp[4] = ins[1]; }
        else memcpy(exp, ins, sizeof exp);
        if (gradInput->ndim != 5 || memcmp(exp, gradInput->dims, sizeof exp) != 0) {
            mb_printf(&m, "gradInput: shape must be %s = ", ndhwc ? "[N,iD,iH,iW,C] (NDHWC)" : "[N,C,iD,iH,iW]");
            mb_list(&m, exp, 5);
            mb_printf(&m, " from inputSize but got %lld dims ", (long long)gradInput->ndim);
            mb_list(&m, gradInput->dims, gradInput->ndim);
            return US3D_ERR_PARAM_INVALID;
        }
    }
    {
        static const char *const sn[3] = {"scalesD", "scalesH", "scalesW"};
        const double sc[3] = {scalesD, scalesH, scalesW};
        for (int k = 0; k < 3; k++) {
            /* Per dim, like the host code: a NaN scale is not > 0, so the size ratio is used. */
            double real = sc[k] > 0 ? sc[k] : (double)outs[k] / (double)ins[k + 2];
            if (!(real <= US3D_MAX_SCALE)) {
                char t1[32], t2[32];
                fmt_double(t1, sizeof t1, sc[k]);
                fmt_double(t2, sizeof t2, real);
                if (sc[k] > 0)
                    mb_printf(&m, "%s: scale must be <= 50 but got %s", sn[k], t1);
                else
                    mb_printf(&m, "%s: scale %s is not > 0, so the size ratio outputSize[%d]/inputSize[%d] = "
                              "%lld/%lld = %s is used and must be <= 50", sn[k], t1, k, k + 2,
                              (long long)outs[k], (long long)ins[k + 2], t2);
                return US3D_ERR_PARAM_INVALID;
            }
        }
    }

    /* 3.5 CheckUplimit (skipped on Ascend950).  Only gradOut's dims are effectively checked. */
    if (!skip_uplimit) {
        for (int k = 0; k < 5; k++)
            if (gradOut->dims[k] > (int64_t)INT32_MAX) {
                mb_printf(&m, "gradOut: dim %d = %lld exceeds INT32_MAX (2147483647); shape ", k,
                          (long long)gradOut->dims[k]);
                mb_list(&m, gradOut->dims, 5);
                return US3D_ERR_PARAM_INVALID;
            }
    }
    return US3D_OK;
}
