// A move-only callable whose target lives inside it, never on the heap: the completion callbacks
// of the file I/O path, one or two per read or write, where std::function allocated for every
// capture larger than two pointers (op_read's is five words). A target that does not fit is a
// compile error, not a silent allocation.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace biofs {

template <typename Signature, size_t Capacity = 48>
class InplaceFunction;

template <typename R, typename... Args, size_t Capacity>
class InplaceFunction<R(Args...), Capacity> {
 public:
  InplaceFunction() = default;
  InplaceFunction(std::nullptr_t) {}  // NOLINT: as std::function
  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InplaceFunction> && std::is_invocable_r_v<R, D&, Args...>>>
  InplaceFunction(F&& f) {  // NOLINT: implicit, as std::function
    static_assert(sizeof(D) <= Capacity, "the callable's captures do not fit: raise the capacity");
    static_assert(alignof(D) <= alignof(std::max_align_t));
    static_assert(std::is_nothrow_move_constructible_v<D>);
    new (storage_) D(std::forward<F>(f));
    ops_ = &kOps<D>;
  }
  InplaceFunction(InplaceFunction&& o) noexcept { take(o); }
  InplaceFunction& operator=(InplaceFunction&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  InplaceFunction& operator=(std::nullptr_t) {
    reset();
    return *this;
  }
  InplaceFunction(const InplaceFunction&) = delete;
  InplaceFunction& operator=(const InplaceFunction&) = delete;
  ~InplaceFunction() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  R operator()(Args... args) { return ops_->call(storage_, std::forward<Args>(args)...); }

 private:
  struct Ops {
    R (*call)(void* target, Args&&... args);
    void (*move)(void* to, void* from);  // move-constructs at `to` and destroys `from`
    void (*destroy)(void* target);
  };
  template <typename D>
  static constexpr Ops kOps = {
      [](void* t, Args&&... a) -> R { return (*static_cast<D*>(t))(std::forward<Args>(a)...); },
      [](void* to, void* from) {
        new (to) D(std::move(*static_cast<D*>(from)));
        static_cast<D*>(from)->~D();
      },
      [](void* t) { static_cast<D*>(t)->~D(); },
  };

  void take(InplaceFunction& o) {
    if (!o.ops_) return;
    o.ops_->move(storage_, o.storage_);
    ops_ = o.ops_;
    o.ops_ = nullptr;
  }
  void reset() {
    if (!ops_) return;
    ops_->destroy(storage_);
    ops_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char storage_[Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace biofs
