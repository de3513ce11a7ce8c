/*
 * elementwise.h - what the simulated copy, fill, mul/add and reduce-sum operators share (ops/inplace_copy.c,
 * ops/inplace_fill_scalar.c, ops/mul_add.c, ops/reduce_sum.c): an element of a supported dtype read as a double and written
 * back with the dtype's rounding (float32, float16 and bfloat16 round to nearest, ties to even, through
 * float32; integers truncate toward zero as a C cast; bool is value != 0), and a walk over a strided view (broadcast too).
 */
#ifndef CANNSIM_ELEMENTWISE_H
#define CANNSIM_ELEMENTWISE_H

#include <stdint.h>

/* The dtypes these operators accept: float32, float16, bfloat16, float64, int8..int64, uint8, bool. */
int ew_dtype_ok(int dtype);
double ew_load(int dtype, const void *p);
void ew_store(int dtype, void *p, double v);
/* v as ew_store would round it into dtype, read back (a Cast into dtype and out again). */
double ew_round(int dtype, double v);

/* The dtype rules the arithmetic operators share (opbase data_type_utils.h, on the simulated dtypes): */
/* float32, float16, bfloat16 or float64 */
int ew_is_floating(int dtype);
/* "float32", "int64", ...; "unsupported" for a dtype outside ew_dtype_ok's */
const char *ew_dtype_name(int dtype);
/* PromoteType (kPromoteTypesLookup): PyTorch's promotion table */
int ew_promote(int a, int b);
/* CanCast: the rule a cast from -> to breaks ("no floating to integral", ...), or NULL where it may */
const char *ew_cast_refused(int from, int to);

/* A view: sizes and element strides (ndim <= 25); data already points at the view's first element. */
typedef struct {
    int64_t ndim;
    int64_t size[25];
    int64_t stride[25];
    int dtype;
    char *data;
} ew_view;

/* The view of tensor t seen with tensor to's ndim and sizes (stride 0 on a dim t broadcasts over; to itself: its
   own view); t must broadcast to to (opapi_check_broadcast). */
struct aclTensor;
void ew_view_as(ew_view *v, const struct aclTensor *t, const struct aclTensor *to);

/* Number of elements, and the byte offset of element number i (row-major order) of the view. */
int64_t ew_numel(const ew_view *v);
int64_t ew_offset(const ew_view *v, int64_t i);

#endif
