/* resnet's reference training input in C: decode only a JPEG's crop window, and resize a crop to 224x224 by
 * TensorFlow 1's bilinear rule in one pass. Used by data.py's ReferenceTrainTransform when it builds.
 *
 * Why this is written here and not taken from a library:
 * - decode_window uses libjpeg-turbo itself (jpeg_skip_scanlines, jpeg_crop_scanline: its partial
 *   decompression), which no Python binding exposes (simplejpeg, PyTurboJPEG, Pillow decode whole images or
 *   at a reduced DCT scale, which changes the pixels). Rows below the window are never read; rows above it
 *   and columns beside it are entropy-decoded but not transformed, upsampled or converted.
 * - resize_window computes the numbers of data.tf1_resize_bilinear (the reference's corner-anchored bilinear,
 *   no antialiasing), operation by operation in float32, as torch computes them there; no image library
 *   resizes by that rule, and torch's passes over the crop cost three times this loop.
 * Both are bit for bit the pure Python path's numbers (tests/unit/test_resnet_fast_path.py). Nothing read from
 * a file is trusted: every size is checked against the buffers, and every libjpeg error or warning becomes a
 * ValueError (the caller falls back to a whole-image decoder).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#define OUT 224

/* ---------------------------------------------------------------- libjpeg errors as exceptions */
struct guarded_error {
    struct jpeg_error_mgr mgr;
    jmp_buf escape;
    char message[JMSG_LENGTH_MAX];
};

static void on_error(j_common_ptr info) {
    struct guarded_error *err = (struct guarded_error *)info->err;
    (*info->err->format_message)(info, err->message);
    longjmp(err->escape, 1);
}

static void on_message(j_common_ptr info, int level) {
    if (level < 0) { /* a warning (corrupt data libjpeg recovered from): counted, never printed */
        struct guarded_error *err = (struct guarded_error *)info->err;
        if (err->mgr.num_warnings == 0) (*info->err->format_message)(info, err->message);
        err->mgr.num_warnings++;
    }
}

/* Decode rows [top, top + h) and columns [left, left + w) of an 8-bit YCbCr or RGB JPEG as RGB into out
 * (h * w * 3 bytes). Returns NULL on success, else a message (in err->message or a static string). */
static const char *decode(const unsigned char *raw, size_t size, int top, int left, int h, int w,
                          unsigned char *out, struct guarded_error *err) {
    struct jpeg_decompress_struct info;
    unsigned char *volatile row = NULL;
    const char *volatile failure = NULL;
    memset(&info, 0, sizeof info); /* so that destroying it is safe whenever an error comes */
    info.err = jpeg_std_error(&err->mgr);
    err->mgr.error_exit = on_error;
    err->mgr.emit_message = on_message;
    err->message[0] = '\0';
    if (setjmp(err->escape)) {
        failure = err->message;
        goto done;
    }
    jpeg_create_decompress(&info);
    jpeg_mem_src(&info, raw, (unsigned long)size);
    jpeg_read_header(&info, TRUE);
    if (info.num_components != 3 || (info.jpeg_color_space != JCS_YCbCr && info.jpeg_color_space != JCS_RGB)) {
        failure = "not a three-channel YCbCr or RGB JPEG";
        goto done;
    }
    info.out_color_space = JCS_RGB;
    info.dct_method = JDCT_ISLOW; /* libjpeg's defaults, as PIL, simplejpeg and torchvision decode */
    info.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&info);
    if (info.output_components != 3 || top < 0 || left < 0 || h < 1 || w < 1 ||
        (long)top + h > (long)info.output_height || (long)left + w > (long)info.output_width) {
        failure = "the window is not inside the image";
        goto done;
    }
    /* One column more on each side where the image has it: the chroma upsampling of the window's edge
     * columns then reads the same neighbours as in a whole-image decode. libjpeg widens the region further,
     * to whole iMCU columns, and says where it starts. */
    JDIMENSION x = left > 0 ? (JDIMENSION)(left - 1) : 0;
    JDIMENSION end = (JDIMENSION)left + (JDIMENSION)w < info.output_width ? (JDIMENSION)(left + w + 1)
                                                                          : info.output_width;
    JDIMENSION span = end - x;
    jpeg_crop_scanline(&info, &x, &span);
    if (x > (JDIMENSION)left || (size_t)x + span < (size_t)left + (size_t)w) {
        failure = "libjpeg's cropping region does not cover the window";
        goto done;
    }
    row = malloc((size_t)span * 3);
    if (row == NULL) {
        failure = "out of memory";
        goto done;
    }
    if (top > 0 && jpeg_skip_scanlines(&info, (JDIMENSION)top) != (JDIMENSION)top) {
        failure = "the image ended before the window";
        goto done;
    }
    for (int y = 0; y < h; y++) {
        JSAMPROW rows[1] = {row};
        if (jpeg_read_scanlines(&info, rows, 1) != 1) {
            failure = "the image ended inside the window";
            goto done;
        }
        memcpy(out + (size_t)y * w * 3, row + ((size_t)left - x) * 3, (size_t)w * 3);
    }
    if (err->mgr.num_warnings > 0) failure = err->message;
done:
    free(row);
    jpeg_destroy_decompress(&info); /* also aborts a decompression left half-way */
    return failure;
}

static PyObject *decode_window(PyObject *self, PyObject *args) {
    Py_buffer raw, out;
    int top, left, h, w;
    if (!PyArg_ParseTuple(args, "y*iiiiw*", &raw, &top, &left, &h, &w, &out)) return NULL;
    const char *failure = NULL;
    if (h < 1 || w < 1 || out.len != (Py_ssize_t)h * w * 3) {
        failure = "the output buffer is not h * w * 3 bytes";
    } else {
        struct guarded_error *err = malloc(sizeof *err);
        if (err == NULL) {
            failure = "out of memory";
        } else {
            const char *f;
            Py_BEGIN_ALLOW_THREADS
            f = decode(raw.buf, (size_t)raw.len, top, left, h, w, out.buf, err);
            Py_END_ALLOW_THREADS
            if (f != NULL) PyErr_Format(PyExc_ValueError, "JPEG window decode: %s", f[0] ? f : "libjpeg error");
            free(err);
            PyBuffer_Release(&raw);
            PyBuffer_Release(&out);
            if (f != NULL) return NULL;
            Py_RETURN_NONE;
        }
    }
    PyBuffer_Release(&raw);
    PyBuffer_Release(&out);
    PyErr_SetString(PyExc_ValueError, failure);
    return NULL;
}

/* ---------------------------------------------------------------- the TF1 bilinear resize */
/* data._tf1_axis: output i samples the input at i * float32(n / 224), floor and the next pixel clamped. */
static void tf1_axis(int n, int *lower, int *upper, float *weight) {
    float step = (float)((double)n / OUT);
    for (int i = 0; i < OUT; i++) {
        float pos = (float)i * step;
        float lo = floorf(pos);
        float hi = ceilf(pos);
        if (hi > (float)(n - 1)) hi = (float)(n - 1);
        lower[i] = (int)lo;
        upper[i] = (int)hi;
        weight[i] = pos - lo;
    }
}

/* One source row interpolated along the row: near + (far - near) * wx for each output column and channel,
 * each operation rounded to float32 as torch's elementwise ops round it. near_at, far_at: the byte offsets of
 * each output value's two samples in the row; wx3: each output value's weight. The gathers come first, so that
 * the arithmetic is a loop the compiler vectorizes. */
static void along_row(const unsigned char *src, const int *near_at, const int *far_at, const float *wx3,
                      float *dst) {
    unsigned char near[OUT * 3], far[OUT * 3];
    for (int j = 0; j < OUT * 3; j++) {
        near[j] = src[near_at[j]];
        far[j] = src[far_at[j]];
    }
    for (int j = 0; j < OUT * 3; j++) {
        float a = (float)near[j];
        float diff = (float)far[j] - a;
        float scaled = diff * wx3[j];
        dst[j] = scaled + a;
    }
}

static PyObject *resize_window(PyObject *self, PyObject *args) {
    Py_buffer src, out;
    int height, width, top, left, h, w, flip;
    float mean[3];
    if (!PyArg_ParseTuple(args, "y*iiiiiipw*(fff)", &src, &height, &width, &top, &left, &h, &w, &flip, &out,
                          &mean[0], &mean[1], &mean[2]))
        return NULL;
    if (height < 1 || width < 1 || src.len != (Py_ssize_t)height * width * 3 ||
        out.len != (Py_ssize_t)OUT * OUT * 3 * (Py_ssize_t)sizeof(float) || top < 0 || left < 0 || h < 1 ||
        w < 1 || (long)top + h > height || (long)left + w > width) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "resize_window: the window or a buffer does not fit the image");
        return NULL;
    }
    int y0[OUT], y1[OUT], x0[OUT], x1[OUT];
    float wy[OUT], wx[OUT];
    tf1_axis(h, y0, y1, wy);
    tf1_axis(w, x0, x1, wx);
    int near_at[OUT * 3], far_at[OUT * 3];
    float wx3[OUT * 3], mean3[OUT * 3];
    for (int j = 0; j < OUT; j++) { /* columns of the image; a flip reverses the columns read */
        int a = left + (flip ? (w - 1) - x0[j] : x0[j]);
        int b = left + (flip ? (w - 1) - x1[j] : x1[j]);
        for (int c = 0; c < 3; c++) {
            near_at[j * 3 + c] = a * 3 + c;
            far_at[j * 3 + c] = b * 3 + c;
            wx3[j * 3 + c] = wx[j];
            mean3[j * 3 + c] = mean[c];
        }
    }
    float *rows = malloc(sizeof(float) * OUT * 3 * 2); /* the last two source rows interpolated along the row */
    if (rows == NULL) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&out);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    const unsigned char *pixels = src.buf;
    float *dst = out.buf;
    int held[2] = {-1, -1};
    for (int i = 0; i < OUT; i++) {
        int slot_of[2];
        for (int k = 0; k < 2; k++) {
            int want = k == 0 ? y0[i] : y1[i];
            int slot = held[0] == want ? 0 : held[1] == want ? 1 : -1;
            if (slot < 0) { /* computed into the slot the other half of this output row does not hold */
                int other = k == 0 ? (held[0] == y1[i] ? 0 : held[1] == y1[i] ? 1 : -1) : slot_of[0];
                slot = other == 0 ? 1 : 0;
                along_row(pixels + ((size_t)top + want) * width * 3, near_at, far_at, wx3, rows + slot * OUT * 3);
                held[slot] = want;
            }
            slot_of[k] = slot;
        }
        const float *part[2] = {rows + slot_of[0] * OUT * 3, rows + slot_of[1] * OUT * 3};
        float weight = wy[i];
        for (int j = 0; j < OUT * 3; j++) { /* upper + (lower - upper) * wy, less the channel's mean */
            float upper = part[0][j];
            float diff = part[1][j] - upper;
            float scaled = diff * weight;
            float value = scaled + upper;
            dst[(size_t)i * OUT * 3 + j] = value - mean3[j];
        }
    }
    Py_END_ALLOW_THREADS
    free(rows);
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_window", decode_window, METH_VARARGS,
     "decode_window(jpeg, top, left, h, w, out): rows [top, top+h) and columns [left, left+w) of an 8-bit "
     "YCbCr or RGB JPEG, as RGB, into the writable buffer out of h*w*3 bytes; ValueError on any libjpeg error "
     "or warning."},
    {"resize_window", resize_window, METH_VARARGS,
     "resize_window(pixels, height, width, top, left, h, w, flip, out, mean): the window of an (height, width, "
     "3) uint8 image, flipped when flip, resized to 224x224 by TensorFlow 1's bilinear rule, the three means "
     "subtracted, into out, a writable buffer of 224*224*3 float32 (channels last)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_window", NULL, -1, methods};

PyMODINIT_FUNC PyInit__window(void) { return PyModule_Create(&module); }
