/*
 * us3d_kernel.h - operator core of the simulated aclnnUpsampleNearestExact3dBackward.
 *
 * Self-contained C11 module (no dependency on the rest of the simulator, no global state,
 * thread-safe, no heap allocation).  It provides
 *   - the phase-1 parameter checks (cann-abi.md §5.1 step 3, same order and status codes),
 *   - the float32 window formula of the kernel (cann-abi.md §5.2, §5.3, §6.5),
 *   - a separable CPU kernel (W sums, then H sums, then D sums in float32, like the Atlas A2/A3
 *     kernel of cann-abi.md §5.3; the passes are fused per gradInput row, so only a few rows of
 *     float32 scratch live in the caller's workspace),
 *   - IEEE binary16 / bfloat16 <-> float32 conversions (round to nearest, ties to even).
 *
 * Facts used (all from docs/cann-abi.md):
 *   aclDataType: ACL_FLOAT=0, ACL_FLOAT16=1, ACL_BF16=27 (§3.1)
 *   aclFormat:   ACL_FORMAT_NDHWC=27 (§3.2)
 *   status:      ACLNN_SUCCESS=0, ACLNN_ERR_PARAM_NULLPTR=161001, ACLNN_ERR_PARAM_INVALID=161002 (§3.5)
 */
#ifndef US3D_KERNEL_H
#define US3D_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values of aclDataType / aclFormat / aclnn status used here (cann-abi.md §3.1, §3.2, §3.5). */
#define US3D_DT_FLOAT 0
#define US3D_DT_FLOAT16 1
#define US3D_DT_BF16 27
#define US3D_FORMAT_NDHWC 27
#define US3D_OK 0
#define US3D_ERR_PARAM_NULLPTR 161001
#define US3D_ERR_PARAM_INVALID 161002
/* Largest accepted "real scale" (cann-abi.md §5.1 step 3.4, MAX_SUPPORT_SCALE). */
#define US3D_MAX_SCALE 50.0

/* ------------------------------------------------------------------------------------------ */
/* Kernel                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    int dtype;                 /* same dtype for both tensors: US3D_DT_FLOAT, _FLOAT16 or _BF16 */
    /* Logical NCDHW view of each tensor: sizes and ELEMENT strides.  The glue has already permuted
       an NDHWC tensor's physical strides into N,C,D,H,W order and applied the view offset to the
       data pointer.  Any int64 strides are accepted (non-contiguous views, permutations). */
    int64_t go_size[5]; int64_t go_stride[5]; const void *go_data;   /* gradOut  [N,C,oD,oH,oW] */
    int64_t gi_size[5]; int64_t gi_stride[5]; void *gi_data;         /* gradInput[N,C,iD,iH,iW] */
    float scale[3];            /* resolved float32 factors s_D, s_H, s_W (see us3d_resolve_scales) */
    void *workspace; uint64_t workspace_size;
} us3d_args;

/* Resolve the kernel's float32 factors (cann-abi.md §5.2, §6.5): if sd>0 && sh>0 && sw>0 then
   s[k] = (float)scale_k for every k, otherwise s[k] = (float)out3[k] / (float)in3[k] for every k
   (a NaN scale is not > 0, so it selects the size ratio).  out3 = gradOut D,H,W sizes (the
   outputSize), in3 = gradInput D,H,W sizes.  An in3[k] <= 0 gives s[k] = 0. */
void us3d_resolve_scales(double sd, double sh, double sw, const int64_t out3[3],
                         const int64_t in3[3], float s[3]);

/* Window start lo(i) = min(max(ceil(f32(f32(i)*s) - 0.5f), 0), O), evaluated with unfused float32
   operations (cann-abi.md §5.3, §6.5).  A NaN intermediate gives 0. */
int64_t us3d_lo(int64_t i, float s, int64_t O);

/* Fill lo[0..I] with us3d_lo(i, s, O) for i = 0..I (I+1 entries).  Gradient-input index i owns the
   gradOut window [lo[i], lo[i+1]) along that dim; lo is non-decreasing. */
void us3d_lo_table(float s, int64_t I, int64_t O, int64_t *lo);

/* Bytes of workspace us3d_run needs for these sizes.  Returns 0 only when gradInput is empty
   (some gi_size is 0; then us3d_run does nothing), and UINT64_MAX if the size does not fit in
   64 bits, a size is negative, or either tensor's float32 byte count does not fit in 64 bits.
   Layout (after aligning the pointer to 64 bytes; 64 bytes of slack are included): int64 lo
   tables for D, H, W (iD+1, iH+1, iW+1 entries), then four float32 row buffers of
   max(iW, oW, min(C, 1024)) elements (D and H accumulators, a W-sum scratch for channels-last
   blocks, a widened 16-bit gradOut row).  It does not grow with N, C, D or H. */
uint64_t us3d_workspace_bytes(const int64_t go_size[5], const int64_t gi_size[5]);

/* Run the backward:
     gradInput[n,c,d,h,w] = sum of gradOut[n,c, lo_D(d):lo_D(d+1), lo_H(h):lo_H(h+1), lo_W(w):lo_W(w+1)]
   with float32 accumulation, separably (W, then H, then D); each window is summed sequentially in
   increasing index order, so results are deterministic.  fp16/bf16 outputs are rounded once from
   float32 (round to nearest even).  Empty windows give 0.  gradOut and gradInput must not overlap
   (gradInput rows are written while later gradOut rows are still to be read; phase 2 of the
   simulated operator rejects overlapping tensors).
   Returns US3D_OK (0) on success (also when gradInput is empty), or US3D_ERR_PARAM_INVALID (161002)
   if a is NULL, the dtype is not 0/1/27, a size is negative, N or C of the two tensors differ, a
   data pointer of a non-empty tensor is NULL, or the workspace is NULL/smaller than
   us3d_workspace_bytes(). */
int us3d_run(const us3d_args *a);

/* ------------------------------------------------------------------------------------------ */
/* Phase-1 checks                                                                              */
/* ------------------------------------------------------------------------------------------ */

typedef struct {           /* a tensor's metadata as the glue sees it; present==0 means a NULL pointer was passed */
    int present; int dtype; int format; int64_t ndim; int64_t dims[8];   /* view dims; format = aclFormat value */
} us3d_tensor_meta;
typedef struct { int present; int64_t len; int64_t vals[8]; } us3d_array_meta;

/* cann-abi.md §5.1 step 3, in order:
     1. NULL gradOut, outputSize, inputSize, gradInput (in that order)          -> 161001
     2. gradOut dtype in {0,1,27}; gradInput dtype == gradOut dtype              -> 161002
     3. gradOut ndim == 5; outputSize len == 3; inputSize len == 5               -> 161002
     4. inputSize[2..4] > 0; outputSize[0..2] > 0 (N, C may be 0);
        gradOut view dims == [N,C,oD,oH,oW] ([N,oD,oH,oW,C] if its format is NDHWC=27);
        gradInput ndim == 5 and view dims == [N,C,iD,iH,iW] ([N,iD,iH,iW,C] if NDHWC);
        real scale_k = scale_k > 0 ? scale_k : (double)out_k / in_k must be <= 50 (D, H, W;
        per dim; a NaN scale is not > 0, so its size ratio is used; +inf fails)
                                                                                 -> 161002
     5. unless skip_uplimit: each gradOut view dim <= INT32_MAX                  -> 161002
   Returns 0, 161001 or 161002.  Writes a one-line, NUL-terminated message into msg (if msg != NULL
   and msglen > 0; truncated to msglen-1 chars) naming the parameter, the rule and the offending
   value; "" on success.  An empty gradOut (N or C == 0) passes.  Arrays/dims with len/ndim > 8
   are printed only up to 8 entries. */
int us3d_check(const us3d_tensor_meta *gradOut, const us3d_array_meta *outputSize,
               const us3d_array_meta *inputSize, double scalesD, double scalesH, double scalesW,
               const us3d_tensor_meta *gradInput, int skip_uplimit, char *msg, size_t msglen);

/* ------------------------------------------------------------------------------------------ */
/* Conversions (round to nearest, ties to even; subnormals, infinities and NaN handled; a NaN    */
/* becomes a quiet NaN with the same sign).                                                     */
/* ------------------------------------------------------------------------------------------ */
float us3d_f16_to_f32(uint16_t h);
uint16_t us3d_f32_to_f16(float f);
float us3d_bf16_to_f32(uint16_t b);
uint16_t us3d_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif

#endif /* US3D_KERNEL_H */
