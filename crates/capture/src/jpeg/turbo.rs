//! libjpeg-turbo's TurboJPEG API, loaded at run time (`dlopen` of `libturbojpeg.so.0`), so
//! the binary starts and runs every other source on a board without it, and builds for
//! the boards need no copy of it: only a camera or a file that delivers JPEG asks for it,
//! and its absence is then an error naming the package.
//!
//! Only the calls the luma decoder makes are bound, with the types of TurboJPEG 2.x's
//! `turbojpeg.h` (the same in 3.x, which keeps these functions).

use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::sync::OnceLock;

/// The library's file name (its soname since libjpeg-turbo 1.5).
pub(super) const LIBRARY: &str = "libturbojpeg.so.0";

/// `TJPF_GRAY`: one byte a pixel, luma only.
pub(super) const PIXEL_FORMAT_GRAY: c_int = 6;
/// `TJFLAG_ACCURATEDCT`: the accurate integer IDCT (`JDCT_ISLOW`), as OpenCV's decoder
/// uses; TurboJPEG's default for decompression too, asked for so it cannot change.
const FLAG_ACCURATE_DCT: c_int = 4096;
/// `TJFLAG_LIMITSCANS`: refuse a progressive image with an unreasonable number of scans,
/// whose decoding would take time without end (libjpeg-turbo's own advice for untrusted
/// input).
const FLAG_LIMIT_SCANS: c_int = 32768;
pub(super) const DECODE_FLAGS: c_int = FLAG_ACCURATE_DCT | FLAG_LIMIT_SCANS;
/// `TJERR_WARNING`: the image was decoded, but its data may be damaged.
pub(super) const ERROR_WARNING: c_int = 0;
/// `TJPF_RGB`: three bytes a pixel, R G B.
pub(super) const PIXEL_FORMAT_RGB: c_int = 0;
/// `TJSAMP_422`: chroma at half the width, as most UVC cameras' MJPEG.
pub(super) const SUBSAMPLING_422: c_int = 1;
/// `TJSAMP_GRAY`: luma only, no chroma.
pub(super) const SUBSAMPLING_GRAY: c_int = 3;

type Handle = *mut c_void;

/// The functions of the loaded library.
pub(super) struct TurboJpeg {
    pub init_decompress: unsafe extern "C" fn() -> Handle,
    pub decompress2: unsafe extern "C" fn(
        Handle,
        *const u8,
        c_ulong,
        *mut u8,
        c_int,
        c_int,
        c_int,
        c_int,
        c_int,
    ) -> c_int,
    pub get_error_str2: unsafe extern "C" fn(Handle) -> *mut c_char,
    pub init_compress: unsafe extern "C" fn() -> Handle,
    pub compress2: unsafe extern "C" fn(
        Handle,
        *const u8,
        c_int,
        c_int,
        c_int,
        c_int,
        *mut *mut u8,
        *mut c_ulong,
        c_int,
        c_int,
        c_int,
    ) -> c_int,
    pub free: unsafe extern "C" fn(*mut u8),
    pub get_error_code: unsafe extern "C" fn(Handle) -> c_int,
    pub destroy: unsafe extern "C" fn(Handle) -> c_int,
}

/// Why libjpeg-turbo's TurboJPEG library cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LibraryError {
    /// `dlopen` found no such library; `detail` is the loader's word for why.
    #[error(
        "cannot load {lib} ({detail}): JPEG and MJPEG need libjpeg-turbo's TurboJPEG \
         library (Debian and Ubuntu: the package libturbojpeg0)",
        lib = LIBRARY
    )]
    NotFound {
        /// The dynamic loader's message (`dlerror`).
        detail: String,
    },
    /// A library of that name lacks one of TurboJPEG's functions: it is another library.
    #[error(
        "{lib} has no {symbol} ({detail}): it is not libjpeg-turbo's TurboJPEG library",
        lib = LIBRARY
    )]
    NoSymbol {
        /// The missing function's name, e.g. `tjDecompress2`.
        symbol: String,
        /// The dynamic loader's message (`dlerror`).
        detail: String,
    },
    /// A call that fails only when the library cannot allocate, named.
    #[error("{lib}: {call} failed", lib = LIBRARY)]
    Failed {
        /// The TurboJPEG function that failed, e.g. `tjInitDecompress`.
        call: &'static str,
    },
}

/// The library, loaded on first use; the error says why it could not be.
pub(super) fn library() -> Result<&'static TurboJpeg, LibraryError> {
    static LOADED: OnceLock<Result<TurboJpeg, LibraryError>> = OnceLock::new();
    LOADED.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// The last `dlerror()` text, or `fallback`.
fn dl_error(fallback: &str) -> String {
    // SAFETY: dlerror takes no argument; it returns null or a NUL-terminated string that
    // stays valid until the next dl* call on this thread, and is copied out at once.
    let text = unsafe { libc::dlerror() };
    if text.is_null() {
        return fallback.to_string();
    }
    // SAFETY: non-null, NUL-terminated (dlerror's contract), read before any other dl call.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

fn load() -> Result<TurboJpeg, LibraryError> {
    let name = c"libturbojpeg.so.0";
    // SAFETY: dlopen takes a NUL-terminated name and flags; it runs the library's
    // initialisers, which for libturbojpeg set up nothing but its own tables. The handle
    // is never closed: the functions below stay valid for the life of the process.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(LibraryError::NotFound {
            detail: dl_error("not found"),
        });
    }
    let symbol = |name: &CStr| -> Result<*mut c_void, LibraryError> {
        // SAFETY: `handle` is a live library handle and `name` NUL-terminated.
        let address = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if address.is_null() {
            Err(LibraryError::NoSymbol {
                symbol: name.to_string_lossy().into_owned(),
                detail: dl_error("missing"),
            })
        } else {
            Ok(address)
        }
    };
    // Each symbol is the function of that name in libturbojpeg, and each field's type
    // its C signature in turbojpeg.h.
    Ok(TurboJpeg {
        // SAFETY: `tjhandle tjInitDecompress(void)`.
        init_decompress: unsafe { function(symbol(c"tjInitDecompress")?) },
        // SAFETY: `int tjDecompress2(tjhandle, const unsigned char *, unsigned long,
        // unsigned char *, int, int, int, int, int)`.
        decompress2: unsafe { function(symbol(c"tjDecompress2")?) },
        // SAFETY: `char *tjGetErrorStr2(tjhandle)`.
        get_error_str2: unsafe { function(symbol(c"tjGetErrorStr2")?) },
        // SAFETY: `tjhandle tjInitCompress(void)`.
        init_compress: unsafe { function(symbol(c"tjInitCompress")?) },
        // SAFETY: `int tjCompress2(tjhandle, const unsigned char *, int, int, int, int,
        // unsigned char **, unsigned long *, int, int, int)`.
        compress2: unsafe { function(symbol(c"tjCompress2")?) },
        // SAFETY: `void tjFree(unsigned char *)`.
        free: unsafe { function(symbol(c"tjFree")?) },
        // SAFETY: `int tjGetErrorCode(tjhandle)`.
        get_error_code: unsafe { function(symbol(c"tjGetErrorCode")?) },
        // SAFETY: `int tjDestroy(tjhandle)`.
        destroy: unsafe { function(symbol(c"tjDestroy")?) },
    })
}

/// The function at `address` as the function pointer type `F`.
///
/// # Safety
/// `address` is a function whose C signature is `F`'s, an `unsafe extern "C" fn`.
unsafe fn function<F: Copy>(address: *mut c_void) -> F {
    assert_eq!(
        std::mem::size_of::<F>(),
        std::mem::size_of::<*mut c_void>(),
        "a function pointer is as wide as a data pointer on every target built for"
    );
    // SAFETY: `F` is a function pointer type as wide as `address` (checked above), and
    // `address` such a function (this function's contract).
    unsafe { std::mem::transmute_copy(&address) }
}
