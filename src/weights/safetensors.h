// safetensors.h: Hugging Face's safetensors container, read as a hostile file
// and written for F32 tensors.
//
// The format: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (an
// object; trailing spaces allowed), then the data buffer. Each JSON member but
// "__metadata__" (an object of strings) is a tensor:
//   "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// with begin/end byte offsets into the data buffer. The tensors must cover the
// buffer exactly, without overlap or holes, and each one's end - begin must be
// its element count times its dtype's size. The reader checks all of it, plus
// the header length's bounds, NUL bytes and \u0000 escapes (cJSON keeps C
// strings, so a name could lose its tail unseen), duplicate names and keys,
// and integer fields that are not exact whole numbers. Every refusal names the
// file (the label) and, where one is at fault, the tensor.
#ifndef WGPT_SAFETENSORS_H
#define WGPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define WGPT_ST_MAX_DIMS 8
// The reference implementation's limit on the JSON header.
#define WGPT_ST_MAX_HEADER ((uint64_t)100000000)

typedef enum wgpt_st_dtype {
    WGPT_ST_BOOL, WGPT_ST_U8, WGPT_ST_I8, WGPT_ST_F8_E5M2, WGPT_ST_F8_E4M3, WGPT_ST_I16, WGPT_ST_U16,
    WGPT_ST_F16, WGPT_ST_BF16, WGPT_ST_I32, WGPT_ST_U32, WGPT_ST_F32, WGPT_ST_F64, WGPT_ST_I64, WGPT_ST_U64,
    WGPT_ST_NUM_DTYPES
} wgpt_st_dtype;

typedef struct wgpt_st_tensor {
    const char *name;  // owned by the wgpt_safetensors
    wgpt_st_dtype dtype;
    uint32_t ndim;
    uint64_t shape[WGPT_ST_MAX_DIMS];
    uint64_t count;             // elements: the product of the shape (1 for a scalar)
    const unsigned char *data;  // count * size bytes inside the file's bytes
    uint64_t nbytes;
} wgpt_st_tensor;

typedef struct wgpt_safetensors {
    wgpt_st_tensor *tensors;  // (count) sorted by name
    size_t count;
    const unsigned char *bytes;  // the length and JSON header (after _parse: the whole file)
    size_t size;                 // of the whole file
    void *map;                   // non-NULL when _open mapped the file (its tensors' bytes)
    size_t map_size;
    unsigned char *head;  // owned by _open: the header, read (not mapped)
    char *names;
    char *meta;  // __metadata__ as "key\0value\0" pairs, owned
    size_t meta_len;
} wgpt_safetensors;

// Parses bytes[0, size) (not copied: it must outlive st). label names the
// file in messages. Returns 0, or -1 with err and st zeroed.
int wgpt_safetensors_parse(wgpt_safetensors *st, const void *bytes, size_t size, const char *label, char *err,
                           size_t errlen);
// Reads a regular file's header and maps the file read-only for the tensors'
// bytes. A file cut short after this makes reads of those bytes fault
// (SIGBUS): read them inside wgpt_bus_guard_run (util/bus_guard.h).
// Returns 0, or -1 with err.
int wgpt_safetensors_open(wgpt_safetensors *st, const char *path, char *err, size_t errlen);
// Frees and unmaps; every tensor pointer becomes invalid. Safe on a zeroed st.
void wgpt_safetensors_close(wgpt_safetensors *st);

// The value of a __metadata__ key, or NULL.
const char *wgpt_safetensors_meta(const wgpt_safetensors *st, const char *key);

// The tensor called name, or NULL.
const wgpt_st_tensor *wgpt_safetensors_find(const wgpt_safetensors *st, const char *name);

const char *wgpt_st_dtype_name(wgpt_st_dtype d);
// Bytes per element.
unsigned wgpt_st_dtype_size(wgpt_st_dtype d);

// Element i of an F32, F16 or BF16 tensor as a float (exact: each widens).
// The caller checks the dtype (wgpt_st_is_float) and i < count.
float wgpt_st_get_f32(const wgpt_st_tensor *t, uint64_t i);
// Elements [i, i + n) as floats into dst (wgpt_st_get_f32 of each, in bulk);
// returns 1 if every one is finite, else 0 (dst written all the same).
int wgpt_st_get_f32_run(const wgpt_st_tensor *t, uint64_t i, uint64_t n, float *dst);
int wgpt_st_is_float(wgpt_st_dtype d);

// A tensor to be written: F32, shape as given, count floats.
typedef struct wgpt_st_spec {
    const char *name;
    uint32_t ndim;
    uint64_t shape[WGPT_ST_MAX_DIMS];
} wgpt_st_spec;

// The bytes before the data of a file holding these F32 tensors back to back
// in the given order, metadata {"format": "pt"} (which transformers requires)
// plus meta_key: meta_value unless meta_key is NULL:
// the 8-byte length and the JSON header, padded with spaces so that the data
// starts 8-byte aligned. Returns a malloc'ed buffer of *len bytes, or NULL
// with err (out of memory, a size past 2^53).
unsigned char *wgpt_safetensors_header(const wgpt_st_spec *t, size_t n, const char *meta_key, const char *meta_value,
                                       size_t *len, char *err, size_t errlen);

#endif
