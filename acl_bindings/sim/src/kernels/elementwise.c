/*
 * elementwise.c - element access by dtype, the dtype rules and strided walks for the simulated copy, fill,
 * arithmetic and reduce-sum operators (elementwise.h).  Conversions of the 16-bit floats: us3d_kernel.c.
 */
#include "elementwise.h"

#include <string.h>

#include "cannsim.h"
#include "us3d_kernel.h"

int ew_dtype_ok(int dtype) {
    switch (dtype) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: case ACL_DOUBLE: case ACL_INT8: case ACL_INT16:
    case ACL_INT32: case ACL_INT64: case ACL_UINT8: case ACL_BOOL:
        return 1;
    default:
        return 0;
    }
}

int ew_is_floating(int dtype) {
    return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

const char *ew_dtype_name(int dtype) {
    switch (dtype) {
    case ACL_FLOAT: return "float32";
    case ACL_FLOAT16: return "float16";
    case ACL_BF16: return "bfloat16";
    case ACL_DOUBLE: return "float64";
    case ACL_INT8: return "int8";
    case ACL_INT16: return "int16";
    case ACL_INT32: return "int32";
    case ACL_INT64: return "int64";
    case ACL_UINT8: return "uint8";
    case ACL_BOOL: return "bool";
    default: return "unsupported";
    }
}

static int int_width(int dtype) {
    return dtype == ACL_INT64 ? 8 : dtype == ACL_INT32 ? 4 : dtype == ACL_INT16 ? 2 : 1;
}

int ew_promote(int a, int b) {
    if (a == b || b == ACL_BOOL) return a;
    if (a == ACL_BOOL) return b;
    if (ew_is_floating(a) != ew_is_floating(b)) return ew_is_floating(a) ? a : b;
    if (ew_is_floating(a)) return a == ACL_DOUBLE || b == ACL_DOUBLE ? ACL_DOUBLE : ACL_FLOAT;
    if ((a == ACL_UINT8 && b == ACL_INT8) || (a == ACL_INT8 && b == ACL_UINT8)) return ACL_INT16;
    return int_width(a) >= int_width(b) ? a : b;
}

const char *ew_cast_refused(int from, int to) {
    if (ew_is_floating(from) && !ew_is_floating(to) && to != ACL_BOOL) return "no floating to integral";
    if (from != ACL_BOOL && to == ACL_BOOL) return "no non-bool to bool";
    return NULL;
}

double ew_load(int dtype, const void *p) {
    switch (dtype) {
    case ACL_FLOAT: { float f; memcpy(&f, p, 4); return f; }
    case ACL_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return us3d_f16_to_f32(h); }
    case ACL_BF16: { uint16_t h; memcpy(&h, p, 2); return us3d_bf16_to_f32(h); }
    case ACL_DOUBLE: { double d; memcpy(&d, p, 8); return d; }
    case ACL_INT8: return *(const int8_t *)p;
    case ACL_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case ACL_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case ACL_INT64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case ACL_UINT8: return *(const uint8_t *)p;
    case ACL_BOOL: return *(const uint8_t *)p != 0;
    default: return 0;
    }
}

/* A double to an integer type as a C cast would, without undefined behaviour out of range (saturates). */
#define CLAMP_INT(T, lo, hi) ((v != v) ? (T)0 : v <= (double)(lo) ? (T)(lo) : v >= (double)(hi) ? (T)(hi) : (T)v)

void ew_store(int dtype, void *p, double v) {
    switch (dtype) {
    case ACL_FLOAT: { float f = (float)v; memcpy(p, &f, 4); break; }
    case ACL_FLOAT16: { uint16_t h = us3d_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case ACL_BF16: { uint16_t h = us3d_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case ACL_DOUBLE: memcpy(p, &v, 8); break;
    case ACL_INT8: *(int8_t *)p = CLAMP_INT(int8_t, INT8_MIN, INT8_MAX); break;
    case ACL_INT16: { int16_t x = CLAMP_INT(int16_t, INT16_MIN, INT16_MAX); memcpy(p, &x, 2); break; }
    case ACL_INT32: { int32_t x = CLAMP_INT(int32_t, INT32_MIN, INT32_MAX); memcpy(p, &x, 4); break; }
    case ACL_INT64: { int64_t x = CLAMP_INT(int64_t, INT64_MIN, INT64_MAX); memcpy(p, &x, 8); break; }
    case ACL_UINT8: *(uint8_t *)p = CLAMP_INT(uint8_t, 0, UINT8_MAX); break;
    case ACL_BOOL: *(uint8_t *)p = v != 0; break;
    default: break;
    }
}

double ew_round(int dtype, double v) {
    unsigned char b[8] = {0};
    ew_store(dtype, b, v);
    return ew_load(dtype, b);
}

int64_t ew_numel(const ew_view *v) {
    int64_t n = 1;
    for (int64_t i = 0; i < v->ndim; i++) n *= v->size[i];
    return n;
}

void ew_view_as(ew_view *v, const aclTensor *t, const aclTensor *to) {
    v->ndim = to->ndim;
    v->dtype = t->dtype;
    int64_t lead = to->ndim - t->ndim;
    for (int64_t i = 0; i < to->ndim; i++) {
        int64_t j = i - lead;
        v->size[i] = to->dims[i];
        v->stride[i] = (j < 0 || t->dims[j] == 1) ? 0 : t->strides[j];
    }
    v->data = (char *)t->data + t->offset * cannsim_dtype_size(t->dtype);
}

int64_t ew_offset(const ew_view *v, int64_t i) {
    int64_t off = 0;
    for (int64_t d = v->ndim - 1; d >= 0; d--) {
        int64_t s = v->size[d];
        off += (i % s) * v->stride[d];
        i /= s;
    }
    return off * cannsim_dtype_size(v->dtype);
}
