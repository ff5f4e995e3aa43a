/* A minimal relay for bench/tee_throughput.py: the tee's hop count and nothing else.

   relay CMD [ARGS...]   runs CMD with pipes on its stdin and stdout and copies, on two threads,
   our stdin to its stdin and its stdout to our stdout, as the tee's forwarding threads do, without
   recording or analysis. Built with `cc -O2 -pthread` by the benchmark when a C compiler is there. */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

struct pair { int from, to; };

static void *copy(void *arg) {
    struct pair *p = arg;
    char buf[65536];
    for (;;) {
        ssize_t n = read(p->from, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(p->to, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) return NULL;
            off += w;
        }
    }
    close(p->to);
    return NULL;
}

int main(int argc, char **argv) {
    int in[2], out[2];
    if (argc < 2 || pipe(in) || pipe(out)) { fprintf(stderr, "usage: relay CMD [ARGS...]\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    pid_t child = fork();
    if (child < 0) return 2;
    if (child == 0) {
        dup2(in[0], 0); dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    close(in[0]); close(out[1]);
    struct pair down = {0, in[1]}, up = {out[0], 1};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, copy, &down);
    pthread_create(&t2, NULL, copy, &up);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
