/*
 * saturn_calls: the only door a client user has into a region's store.
 *
 * Redis checks every command a script or function runs against the ACL of the user who called
 * it, so a client user allowed nothing but FCALL could not run the gears either (they HSET and
 * XADD). This module adds two commands that run a gear function as the server itself:
 *
 *   SATURN.CALL <function> 1 <shard tag> <args...>   -> FCALL    (a gear that writes)
 *   SATURN.READ <function> 1 <shard tag> <args...>   -> FCALL_RO (a gear that only reads)
 *
 * Only the gears a client may call are accepted (the services' own, which apply replicated
 * updates, are refused), and exactly one key is passed: the shard's hash tag ("{s3}"), which
 * every key of the shard carries. Declared as the commands' key, it lets a Redis Cluster send
 * a call to the master holding the shard (MOVED), as it does FCALL. A client user is then
 * given these two commands, the tags as its only keys, and nothing else that touches data.
 *
 * A store whose disk is nearly full refuses SATURN.CALL (a "MISCONF" error, which clients raise
 * as StoreFull) while less than min-free-mb (the module's argument, default 32) is free where
 * Redis keeps its files (its working directory): under appendfsync always, Redis exits when an
 * append fails rather than answer a write it could not log, and a region whose store keeps
 * exiting tells its clients nothing useful. What is left is for the services' own writes (the
 * remote updates they apply). Writes go on by themselves once there is room again.
 *
 * The module API is reached the way Redis hands it to every module: the first field of the
 * context passed to RedisModule_OnLoad is the function that looks API functions up by name.
 * Only the handful used here are declared (their signatures are Redis's, API version 1).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef int (*CommandFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#define OK 0
#define ERR 1
#define API_VERSION 1

static int (*GetApi)(const char *name, void *target);
static void (*SetModuleAttribs)(RedisModuleCtx *ctx, const char *name, int ver, int apiver);
static int (*CreateCommand)(RedisModuleCtx *ctx, const char *name, CommandFunc func, const char *flags,
                            int firstkey, int lastkey, int keystep);
static RedisModuleCallReply *(*Call)(RedisModuleCtx *ctx, const char *command, const char *fmt, ...);
static int (*ReplyWithCallReply)(RedisModuleCtx *ctx, RedisModuleCallReply *reply);
static void (*FreeCallReply)(RedisModuleCallReply *reply);
static int (*ReplyWithError)(RedisModuleCtx *ctx, const char *error);
static int (*WrongArity)(RedisModuleCtx *ctx);
static const char *(*StringPtrLen)(const RedisModuleString *string, size_t *length);

/* The gears a client may call; kept in step with causal_client/wire.py. */
static const char *CLIENT_GEARS[] = {
    "saturn_write", "saturn_check_write", "saturn_read", "saturn_read_at", "saturn_stage",
    "saturn_commit", "saturn_settle", "saturn_check", "saturn_migrate", "saturn_attach",
    "saturn_claim", "saturn_describe", "saturn_version", "saturn_strong_put", "saturn_strong_stamp", "saturn_strong_ts",
    "saturn_strong_set_ts", "saturn_strong_data", "saturn_red_close", "saturn_red_open", "saturn_red_get",
    "saturn_red_put", NULL,
};

static int is_client_gear(const RedisModuleString *name) {
    size_t length;
    const char *text = StringPtrLen(name, &length);
    for (const char **gear = CLIENT_GEARS; *gear != NULL; gear++) {
        if (strlen(*gear) == length && memcmp(*gear, text, length) == 0) return 1;
    }
    return 0;
}

static int forward(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const char *command,
                   const char *fmt) {
    if (argc < 3) return WrongArity(ctx);
    if (!is_client_gear(argv[1])) {
        return ReplyWithError(ctx, "INVALID SATURN.CALL and SATURN.READ run a client's gears only");
    }
    size_t length;
    const char *numkeys = StringPtrLen(argv[2], &length);
    if (length != 1 || numkeys[0] != '1' || argc < 4) {
        return ReplyWithError(ctx, "INVALID a gear call passes one key, its shard's hash tag (numkeys 1)");
    }
    /* 'E': an error comes back as a reply; '!': what the gear writes goes to the AOF. */
    RedisModuleCallReply *reply = Call(ctx, command, fmt, argv + 1, (size_t)(argc - 1));
    if (reply == NULL) return ReplyWithError(ctx, "ERR the gear call could not be made");
    ReplyWithCallReply(ctx, reply);
    FreeCallReply(reply);
    return OK;
}

#define DISK_CHECK_MS 200 /* free space is read at most this often */

static unsigned long long min_free_bytes = 32ULL << 20;
static char disk_full_error[160];

/* Whether the filesystem of Redis's working directory (its --dir) has less than min_free_bytes
 * free for an unprivileged writer. */
static int disk_nearly_full(void) {
    static struct timespec checked;
    static int nearly_full;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long elapsed_ms = (now.tv_sec - checked.tv_sec) * 1000LL + (now.tv_nsec - checked.tv_nsec) / 1000000;
    if ((checked.tv_sec == 0 && checked.tv_nsec == 0) || elapsed_ms >= DISK_CHECK_MS) {
        struct statvfs fs;
        if (statvfs(".", &fs) == 0) {
            nearly_full = (unsigned long long)fs.f_bavail * fs.f_frsize < min_free_bytes;
        }
        checked = now;
    }
    return nearly_full;
}

static int saturn_call(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (min_free_bytes > 0 && disk_nearly_full()) return ReplyWithError(ctx, disk_full_error);
    return forward(ctx, argv, argc, "FCALL", "!Ev");
}

static int saturn_read(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return forward(ctx, argv, argc, "FCALL_RO", "Ev");
}

#define LOOKUP(target, name) \
    if (GetApi("RedisModule_" name, (void *)&target) != OK) return ERR

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    GetApi = (int (*)(const char *, void *))(unsigned long)((void **)ctx)[0];
    LOOKUP(SetModuleAttribs, "SetModuleAttribs");
    LOOKUP(CreateCommand, "CreateCommand");
    LOOKUP(Call, "Call");
    LOOKUP(ReplyWithCallReply, "ReplyWithCallReply");
    LOOKUP(FreeCallReply, "FreeCallReply");
    LOOKUP(ReplyWithError, "ReplyWithError");
    LOOKUP(WrongArity, "WrongArity");
    LOOKUP(StringPtrLen, "StringPtrLen");
    SetModuleAttribs(ctx, "saturn", 1, API_VERSION);
    /* Arguments: "min-free-mb N" (0: never refuse for want of disk). */
    for (int i = 0; i + 1 < argc; i += 2) {
        size_t length;
        const char *name = StringPtrLen(argv[i], &length);
        if (length == 11 && memcmp(name, "min-free-mb", 11) == 0) {
            min_free_bytes = strtoull(StringPtrLen(argv[i + 1], &length), NULL, 10) << 20;
        }
    }
    snprintf(disk_full_error, sizeof disk_full_error,
             "MISCONF the store's disk has less than %llu MB free: writes are refused until it has room",
             min_free_bytes >> 20);
    /* deny-script: a function cannot be called while a script runs (Redis would abort). */
    /* The key is the third argument (the shard's tag), as FCALL's first key is. */
    if (CreateCommand(ctx, "saturn.call", saturn_call, "write deny-oom deny-script", 3, 3, 1) != OK) return ERR;
    if (CreateCommand(ctx, "saturn.read", saturn_read, "readonly deny-script", 3, 3, 1) != OK) return ERR;
    return OK;
}
