#include "reply_queue.h"

#include <pthread.h>

#include <cstring>

namespace biofs {

ReplyQueue::ReplyQueue() : thread_([this] { run(); }) {}

ReplyQueue::~ReplyQueue() {
  push(new Item{nullptr, nullptr, 0, false, {}, {}});  // no request: the thread's last item
  thread_.join();
}

void ReplyQueue::read_done(fuse_req_t req, ssize_t result, const uint8_t* data, StageToken t) {
  auto* item = new Item{nullptr, req, result, true, t, {}};
  if (result > 0) {
    item->data = IoBuf(size_t(result), false);
    std::memcpy(item->data.data(), data, size_t(result));
  }
  push(item);
}

void ReplyQueue::write_done(fuse_req_t req, ssize_t result, StageToken t) {
  push(new Item{nullptr, req, result, false, t, {}});
}

void ReplyQueue::push(Item* item) {
  queued_.fetch_add(1, std::memory_order_relaxed);
  Item* old = head_.load(std::memory_order_relaxed);
  do item->next = old;
  while (!head_.compare_exchange_weak(old, item, std::memory_order_release, std::memory_order_relaxed));
  if (!old) head_.notify_one();  // the thread sleeps only on an empty stack
}

void ReplyQueue::send(Item* item) {
  if (item->result < 0) fuse_reply_err(item->req, int(-item->result));
  else if (item->is_read) fuse_reply_buf(item->req, reinterpret_cast<const char*>(item->data.data()), size_t(item->result));
  else fuse_reply_write(item->req, size_t(item->result));
  stage_request_reply(item->token);
  delete item;
}

void ReplyQueue::run() {
  pthread_setname_np(pthread_self(), "biofs-reply");
  for (bool last = false; !last;) {
    Item* list = head_.exchange(nullptr, std::memory_order_acquire);
    if (!list) {
      head_.wait(nullptr, std::memory_order_acquire);
      continue;
    }
    Item* fifo = nullptr;  // the stack holds the newest first
    while (list) {
      Item* next = list->next;
      list->next = fifo;
      fifo = list;
      list = next;
    }
    while (fifo) {
      Item* next = fifo->next;
      if (fifo->req) send(fifo);
      else last = true, delete fifo;
      fifo = next;
    }
  }
}

}  // namespace biofs
