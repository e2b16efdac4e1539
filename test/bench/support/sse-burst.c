/*
 * The streaming benchmark's clients for its bursts, in C: the load generator
 * must cost the core it shares with the gateway as little as it can, or the
 * gateway's side is charged for the clients' own work (a Node client costs
 * about half a millisecond of that core per stream, as much as a third of the
 * gateway's; docs/streaming.md, "Tenth session"). One thread, epoll, keep-alive
 * connections, nothing allocated per request.
 *
 * Protocol, on standard input, one burst at a time:
 *   "<port> <n> <length>\n" then <length> bytes: a whole HTTP/1.1 request.
 * The request is written on n connections to 127.0.0.1:<port>, one after
 * another with nothing in between, and every response is read to its end
 * (chunked or with a Content-Length). One line answers on standard output:
 *   "ok <ms> <ms> ..." with each stream's time from its own write to the first
 *   read holding "output_text.delta", or "error <why>".
 * Exits when standard input closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 64
#define MAX_PORTS 16
#define MAX_REQUEST 65536
#define BUFFER 65536
#define MARK "output_text.delta"

enum state { HEAD, CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, TRAILERS, LENGTH_BODY, DONE };

struct stream {
  int fd;
  enum state state;
  int status;
  long remaining;     /* bytes left of a chunk or of a Content-Length body */
  int closes;         /* the server said Connection: close */
  size_t line;        /* bytes gathered of the current head, chunk-size or trailer line */
  char text[8192];    /* that line, or the whole head */
  char tail[32];      /* the body's last bytes, for a mark split across reads */
  size_t tail_length;
  double sent;
  double first;       /* ms from the write to the first read with a delta; < 0: none yet */
  int received;       /* bytes of this response read so far */
};

/* Each port's idle keep-alive connections, reused burst after burst. */
static struct {
  int port;
  int fds[MAX_CLIENTS];
} pools[MAX_PORTS];

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void fail(const char *what) {
  perror(what);
  exit(1);
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail("socket");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* An idle connection the server has not closed (bytes or a FIN waiting say it
 * has, or is about to), else a new one. */
static int connection(int port, int slot) {
  int p = 0;
  while (p < MAX_PORTS && pools[p].port != port && pools[p].port != 0) p++;
  if (p == MAX_PORTS) return connect_to(port);
  if (pools[p].port == 0) {
    pools[p].port = port;
    for (int i = 0; i < MAX_CLIENTS; i++) pools[p].fds[i] = -1;
  }
  int fd = pools[p].fds[slot];
  pools[p].fds[slot] = -1;
  if (fd >= 0) {
    char probe;
    ssize_t got = recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return fd;
    close(fd);
  }
  return connect_to(port);
}

static void keep(int port, int slot, int fd) {
  for (int p = 0; p < MAX_PORTS; p++) {
    if (pools[p].port == port) {
      pools[p].fds[slot] = fd;
      return;
    }
  }
  close(fd);
}

static int write_all(int fd, const char *bytes, size_t length) {
  while (length > 0) {
    ssize_t sent = write(fd, bytes, length);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    bytes += sent;
    length -= (size_t)sent;
  }
  return 0;
}

/* Looks for the mark in this read's body bytes, joined to the last read's tail. */
static void scan(struct stream *s, const char *data, size_t length) {
  if (s->first >= 0 || length == 0) return;
  char joined[sizeof s->tail + BUFFER];
  memcpy(joined, s->tail, s->tail_length);
  memcpy(joined + s->tail_length, data, length);
  size_t total = s->tail_length + length;
  if (memmem(joined, total, MARK, sizeof MARK - 1) != NULL) {
    s->first = now_ms() - s->sent;
    return;
  }
  size_t keep_length = total < sizeof s->tail ? total : sizeof s->tail;
  memcpy(s->tail, joined + total - keep_length, keep_length);
  s->tail_length = keep_length;
}

/* Whether a header line (ending in CRLF) holds `word`, case aside. */
static int line_has(const char *line, const char *word) {
  const char *found = strcasestr(line, word);
  const char *end = strstr(line, "\r\n");
  return found != NULL && (end == NULL || found < end);
}

static void head_done(struct stream *s) {
  s->text[s->line] = '\0';
  s->status = atoi(s->text + 9); /* "HTTP/1.1 200 ..." */
  s->state = DONE;
  s->remaining = 0;
  for (char *line = strstr(s->text, "\r\n"); line != NULL; line = strstr(line + 2, "\r\n")) {
    char *name = line + 2;
    if (strncasecmp(name, "transfer-encoding:", 18) == 0 && line_has(name, "chunked")) {
      s->state = CHUNK_SIZE;
    } else if (strncasecmp(name, "content-length:", 15) == 0) {
      s->remaining = atol(name + 15);
      if (s->state == DONE && s->remaining > 0) s->state = LENGTH_BODY;
    } else if (strncasecmp(name, "connection:", 11) == 0) {
      s->closes = line_has(name, "close");
    }
  }
  s->line = 0;
}

/* Feeds one read's bytes through the response's parser. */
static void feed(struct stream *s, const char *data, size_t length) {
  size_t i = 0;
  while (i < length && s->state != DONE) {
    switch (s->state) {
      case HEAD:
      case CHUNK_SIZE:
      case TRAILERS: {
        if (s->line + 1 >= sizeof s->text) {
          s->status = -1;
          s->state = DONE;
          return;
        }
        s->text[s->line++] = data[i++];
        size_t n = s->line;
        if (s->state == HEAD) {
          if (n >= 4 && memcmp(s->text + n - 4, "\r\n\r\n", 4) == 0) head_done(s);
        } else if (n >= 2 && s->text[n - 2] == '\r' && s->text[n - 1] == '\n') {
          if (s->state == TRAILERS) {
            s->state = n == 2 ? DONE : TRAILERS; /* an empty line ends the trailers */
          } else {
            s->remaining = strtol(s->text, NULL, 16);
            s->state = s->remaining == 0 ? TRAILERS : CHUNK_DATA;
          }
          s->line = 0;
        }
        break;
      }
      case CHUNK_DATA:
      case LENGTH_BODY: {
        size_t take = length - i;
        if ((long)take > s->remaining) take = (size_t)s->remaining;
        scan(s, data + i, take);
        i += take;
        s->remaining -= (long)take;
        if (s->remaining == 0) s->state = s->state == CHUNK_DATA ? CHUNK_DATA_END : DONE;
        break;
      }
      case CHUNK_DATA_END: /* the CRLF after a chunk's data */
        if (data[i] == '\n') s->state = CHUNK_SIZE;
        i++;
        break;
      case DONE:
        break;
    }
  }
}

static void reset(struct stream *s, int fd) {
  memset(s, 0, sizeof *s);
  s->fd = fd;
  s->state = HEAD;
  s->first = -1;
}

int main(void) {
  static char request[MAX_REQUEST];
  static char buffer[BUFFER];
  static struct stream streams[MAX_CLIENTS];
  int epoll = epoll_create1(0);
  if (epoll < 0) fail("epoll_create1");
  int port, n;
  size_t length;
  while (scanf("%d %d %zu", &port, &n, &length) == 3) {
    getchar(); /* the newline */
    if (n < 1 || n > MAX_CLIENTS || length > MAX_REQUEST ||
        fread(request, 1, length, stdin) != length) {
      printf("error bad command\n");
      fflush(stdout);
      continue;
    }
    const char *error = NULL;
    int retried[MAX_CLIENTS] = {0};
    /* Connected first, so that the timed writes follow one another at once. */
    for (int c = 0; c < n; c++) {
      int fd = connection(port, c);
      if (fd < 0) {
        error = "connect failed";
        n = c;
        break;
      }
      reset(&streams[c], fd);
      struct epoll_event event = {.events = EPOLLIN, .data.u32 = (uint32_t)c};
      epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
    }
    for (int c = 0; c < n; c++) {
      streams[c].sent = now_ms();
      if (write_all(streams[c].fd, request, length) < 0) error = "write failed";
    }
    int open = n;
    struct epoll_event events[MAX_CLIENTS];
    while (open > 0 && error == NULL) {
      int ready = epoll_wait(epoll, events, MAX_CLIENTS, 30000);
      if (ready <= 0) {
        error = ready == 0 ? "no answer in 30 s" : "epoll_wait failed";
        break;
      }
      for (int e = 0; e < ready; e++) {
        int c = (int)events[e].data.u32;
        struct stream *s = &streams[c];
        ssize_t got = read(s->fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          /* A kept connection the server closed as the request went out:
           * nothing of it was answered, so it is sent again once, as
           * HTTP clients retry an idempotent miss on a reused socket. */
          if (s->received == 0 && !retried[c]) {
            retried[c] = 1;
            epoll_ctl(epoll, EPOLL_CTL_DEL, s->fd, NULL);
            close(s->fd);
            int fd = connect_to(port);
            if (fd < 0) {
              error = "reconnect failed";
              break;
            }
            reset(s, fd);
            struct epoll_event event = {.events = EPOLLIN, .data.u32 = (uint32_t)c};
            epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
            s->sent = now_ms();
            if (write_all(fd, request, length) < 0) error = "write failed";
            continue;
          }
          error = "connection closed mid-answer";
          break;
        }
        s->received += (int)got;
        feed(s, buffer, (size_t)got);
        if (s->state == DONE) {
          epoll_ctl(epoll, EPOLL_CTL_DEL, s->fd, NULL);
          if (s->status == 200 && !s->closes) keep(port, c, s->fd);
          else close(s->fd);
          s->fd = -1;
          open--;
        }
      }
    }
    for (int c = 0; c < n && error == NULL; c++) {
      if (streams[c].status != 200) error = "a status other than 200";
      else if (streams[c].first < 0) error = "a stream with no delta";
    }
    if (error != NULL) {
      for (int c = 0; c < n; c++) {
        if (streams[c].fd >= 0) {
          epoll_ctl(epoll, EPOLL_CTL_DEL, streams[c].fd, NULL);
          close(streams[c].fd);
          streams[c].fd = -1;
        }
      }
      printf("error %s (status %d)\n", error, n > 0 ? streams[0].status : 0);
    } else {
      printf("ok");
      for (int c = 0; c < n; c++) printf(" %.4f", streams[c].first);
      printf("\n");
    }
    fflush(stdout);
  }
  return 0;
}
