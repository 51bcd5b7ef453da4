#include "data/ImageCodec.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

namespace dtrain::data {
namespace {

constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr int64_t kMaxPixels = int64_t{1} << 28;  // beyond: a corrupt header, not a photo

struct TjHandle {
  tjhandle handle;
  explicit TjHandle(tjhandle h) : handle(h) {
    if (!handle) throw ImageError("libjpeg-turbo: cannot create a handle");
  }
  ~TjHandle() { tjDestroy(handle); }
};

// One decompressor per loader thread: creating one per image costs more than small images' decoding.
tjhandle decompressor() {
  thread_local TjHandle h(tjInitDecompress());
  return h.handle;
}

[[noreturn]] void jpegFailed(tjhandle h, const char* what) {
  throw ImageError(std::string("JPEG ") + what + ": " + tjGetErrorStr2(h));
}

ImageSize checkedSize(int64_t height, int64_t width) {
  if (height <= 0 || width <= 0 || height * width > kMaxPixels)
    throw ImageError("image of " + std::to_string(width) + " x " + std::to_string(height) +
                     " pixels");
  return {height, width};
}

ImageSize jpegSize(const uint8_t* bytes, size_t size) {
  int w = 0, h = 0, subsampling = 0, colorspace = 0;
  tjhandle tj = decompressor();
  if (tjDecompressHeader3(tj, bytes, static_cast<unsigned long>(size), &w, &h, &subsampling,
                          &colorspace) != 0)
    jpegFailed(tj, "header");
  return checkedSize(h, w);
}

Image decodeJpeg(const uint8_t* bytes, size_t size) {
  const ImageSize s = jpegSize(bytes, size);
  Image img{s.height, s.width, std::vector<uint8_t>(static_cast<size_t>(s.height * s.width * 3))};
  tjhandle tj = decompressor();
  if (tjDecompress2(tj, bytes, static_cast<unsigned long>(size), img.rgb.data(),
                    static_cast<int>(s.width), 0, static_cast<int>(s.height), TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0)
    jpegFailed(tj, "data");
  return img;
}

struct PngImage {
  png_image image;
  PngImage() {
    std::memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
  }
  ~PngImage() { png_image_free(&image); }
};

[[noreturn]] void pngFailed(const png_image& image) {
  throw ImageError(std::string("PNG: ") + image.message);
}

ImageSize pngSize(const uint8_t* bytes, size_t size) {
  if (size < 24 || std::memcmp(bytes + 12, "IHDR", 4) != 0) throw ImageError("PNG: no IHDR header");
  auto be32 = [&](size_t at) {
    return (int64_t{bytes[at]} << 24) | (int64_t{bytes[at + 1]} << 16) |
           (int64_t{bytes[at + 2]} << 8) | int64_t{bytes[at + 3]};
  };
  return checkedSize(be32(20), be32(16));
}

Image decodePng(const uint8_t* bytes, size_t size) {
  const ImageSize s = pngSize(bytes, size);
  PngImage png;
  if (!png_image_begin_read_from_memory(&png.image, bytes, size)) pngFailed(png.image);
  png.image.format = PNG_FORMAT_RGB;
  Image img{s.height, s.width, std::vector<uint8_t>(PNG_IMAGE_SIZE(png.image))};
  if (img.rgb.size() != static_cast<size_t>(s.height * s.width * 3)) throw ImageError("PNG: bad size");
  if (!png_image_finish_read(&png.image, nullptr, img.rgb.data(), 0, nullptr)) pngFailed(png.image);
  // libpng reports some damage (a short IDAT) as a warning and fills the rest.
  if (png.image.warning_or_error) pngFailed(png.image);
  return img;
}

}  // namespace

ImageFormat sniffImage(const uint8_t* b, size_t n) {
  if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::Jpeg;
  if (n >= 8 && std::memcmp(b, kPngMagic, 8) == 0) return ImageFormat::Png;
  return ImageFormat::Unknown;
}

ImageSize readImageSize(const uint8_t* bytes, size_t size) {
  switch (sniffImage(bytes, size)) {
    case ImageFormat::Jpeg: return jpegSize(bytes, size);
    case ImageFormat::Png: return pngSize(bytes, size);
    default: throw ImageError("not a JPEG or PNG image (its first bytes are neither's)");
  }
}

Image decodeImage(const uint8_t* bytes, size_t size) {
  switch (sniffImage(bytes, size)) {
    case ImageFormat::Jpeg: return decodeJpeg(bytes, size);
    case ImageFormat::Png: return decodePng(bytes, size);
    default: throw ImageError("not a JPEG or PNG image (its first bytes are neither's)");
  }
}

std::vector<uint8_t> encodePng(const Image& img) {
  PngImage png;
  png.image.width = static_cast<png_uint_32>(img.width);
  png.image.height = static_cast<png_uint_32>(img.height);
  png.image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_get_memory_size(png.image, size, 0, img.rgb.data(), 0, nullptr))
    pngFailed(png.image);
  std::vector<uint8_t> out(size);
  if (!png_image_write_to_memory(&png.image, out.data(), &size, 0, img.rgb.data(), 0, nullptr))
    pngFailed(png.image);
  out.resize(size);
  return out;
}

std::vector<uint8_t> encodeJpeg(const Image& img, int quality) {
  std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitCompress(), tjDestroy);
  if (!tj) throw ImageError("libjpeg-turbo: cannot create a handle");
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (tjCompress2(tj.get(), img.rgb.data(), static_cast<int>(img.width), 0,
                  static_cast<int>(img.height), TJPF_RGB, &buffer, &size, TJSAMP_420, quality,
                  0) != 0)
    jpegFailed(tj.get(), "encoding");
  std::vector<uint8_t> out(buffer, buffer + size);
  tjFree(buffer);
  return out;
}

}  // namespace dtrain::data
