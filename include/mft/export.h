/* mft/export.h — MFT_API: symbol visibility for the shared library.
 * The library is built with hidden visibility; MFT_API marks the public ABI. */
#ifndef MFT_EXPORT_H
#define MFT_EXPORT_H
#if defined(MFT_STATIC_DEFINE)
#define MFT_API
#elif defined(__GNUC__) || defined(__clang__)
#define MFT_API __attribute__((visibility("default")))
#else
#define MFT_API
#endif
#endif
