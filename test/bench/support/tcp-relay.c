/*
 * The least any proxy can do: a TCP relay in C, one thread, epoll, no HTTP.
 * Each accepted connection gets its own connection to the upstream and the
 * bytes are copied both ways as they arrive. Pinned where the gateway is
 * pinned, what it adds to direct is what two more loopback hops through
 * another process cost on this machine, with no parsing, no allocation and
 * no runtime of any language in the path: a floor below the bare Node proxy's
 * (docs/streaming.md, "(b)").
 *
 * Usage: tcp-relay <upstream port>. Listens on a free loopback port, prints
 * its URL on a line of its own, and exits when its standard input closes
 * (the parent went away).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FDS 4096
#define BUFFER 65536

/* For each relayed descriptor, the descriptor its bytes go to (-1: none). */
static int peer_of[MAX_FDS];

static void fail(const char *what) {
  perror(what);
  exit(1);
}

static int loopback_socket(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail("socket");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void watch(int epoll, int fd) {
  struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
  if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) < 0) fail("epoll_ctl");
}

static void drop(int fd) {
  int peer = peer_of[fd];
  peer_of[fd] = -1;
  close(fd);
  if (peer >= 0) {
    peer_of[peer] = -1;
    close(peer);
  }
}

/* Writes all of it: the relay's sockets block on write, which on loopback
 * with answers of a few kilobytes never waits in practice. */
static int write_all(int fd, const char *data, ssize_t length) {
  while (length > 0) {
    ssize_t written = write(fd, data, (size_t)length);
    if (written < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    data += written;
    length -= written;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: tcp-relay <upstream port>\n");
    return 2;
  }
  struct sockaddr_in upstream = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
  upstream.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < MAX_FDS; i++) peer_of[i] = -1;

  int listener = loopback_socket();
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in here = {.sin_family = AF_INET, .sin_port = 0};
  here.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr *)&here, sizeof here) < 0) fail("bind");
  if (listen(listener, 512) < 0) fail("listen");
  socklen_t size = sizeof here;
  getsockname(listener, (struct sockaddr *)&here, &size);
  printf("http://127.0.0.1:%d\n", ntohs(here.sin_port));
  fflush(stdout);

  int epoll = epoll_create1(0);
  if (epoll < 0) fail("epoll_create1");
  watch(epoll, listener);
  watch(epoll, STDIN_FILENO);

  static char buffer[BUFFER];
  struct epoll_event events[64];
  for (;;) {
    int ready = epoll_wait(epoll, events, 64, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail("epoll_wait");
    }
    for (int i = 0; i < ready; i++) {
      int fd = events[i].data.fd;
      if (fd == STDIN_FILENO) return 0;
      if (fd == listener) {
        int client = accept(listener, NULL, NULL);
        if (client < 0) continue;
        int server = loopback_socket();
        if (client >= MAX_FDS || server >= MAX_FDS ||
            connect(server, (struct sockaddr *)&upstream, sizeof upstream) < 0) {
          close(client);
          close(server);
          continue;
        }
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        peer_of[client] = server;
        peer_of[server] = client;
        watch(epoll, client);
        watch(epoll, server);
        continue;
      }
      if (peer_of[fd] < 0) continue;
      ssize_t got = read(fd, buffer, BUFFER);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0 || write_all(peer_of[fd], buffer, got) < 0) drop(fd);
    }
  }
}
