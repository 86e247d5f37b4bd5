// cmd_tokenize.c: `wgpt tokenize`: parses options and hands the files to the
// corpus pipeline (data/corpus.h), which writes the shard set.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/data_files.h"
#include "cli/options.h"
#include "cli/signals.h"
#include "data/corpus.h"
#include "data/shard.h"

static const char USAGE_[] =
    "usage: wgpt tokenize [options] FILE...\n\n"
    "Encodes text files (\"-\" reads standard input) into token shards for `wgpt train`:\n"
    "DIR/train_000000.bin, train_000001.bin, ... and DIR/val_000000.bin, ... (llm.c's format:\n"
    "a 1024-byte header, then uint16 tokens; the header also records the tokenizer, and\n"
    "DIR/shard_set.txt lists the set). The new set replaces an old one only once it is\n"
    "complete: a failure or Ctrl-C leaves DIR as it was.\n\n"
    "Whole documents are held out for validation: a document goes to validation when\n"
    "validation holds less than --val-fraction of the tokens so far (so never the first).\n"
    "--split blank-line ends a document at an empty line, as llm.c splits its text corpora\n"
    "at \"\\n\\n\"; --split file makes each file one document. With gpt2, every document\n"
    "starts with the end-of-text token 50256 (as llm.c's data scripts do); bytes has no\n"
    "such token and documents simply follow one another.";

int wgpt_cmd_tokenize(int argc, char **argv) {
    const char *tokname = "gpt2", *bpe_dir = wgpt_default_bpe_dir(), *split = "blank-line";
    wgpt_corpus_opts o;
    memset(&o, 0, sizeof o);
    o.out_dir = "data";
    o.shard_tokens = 100000000;
    float val_fraction = 0.05f;
    const wgpt_opt opts[] = {
        {"tokenizer", WGPT_OPT_STR, &tokname, "gpt2 (GPT-2 BPE, 50257 ids) or bytes (one id per byte)"},
        {"out", WGPT_OPT_STR, &o.out_dir, "output folder, created if missing"},
        {"shard-tokens", WGPT_OPT_COUNT, &o.shard_tokens, "tokens per shard file"},
        {"val-fraction", WGPT_OPT_F32, &val_fraction, "share of the tokens held out for validation"},
        {"split", WGPT_OPT_STR, &split, "blank-line or file: where a document ends"},
        {"bpe-dir", WGPT_OPT_STR, &bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe"},
        {"force", WGPT_OPT_FLAG, &o.force, "replace the shard set wgpt wrote in DIR"},
    };
    char **files = malloc((size_t)(argc > 1 ? argc : 1) * sizeof *files);
    if (!files) {
        fprintf(stderr, "wgpt tokenize: out of host memory\n");
        return 1;
    }
    int nfiles = 0;
    const wgpt_opt_range ranges[] = {{"shard-tokens", 1, (double)WGPT_SHARD_MAX_TOKENS, 0},
                                     {"val-fraction", 0, 1, WGPT_OPT_LT_MAX}};
    int rc = wgpt_opts_parse_ranged(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), ranges, 2, USAGE_, files,
                                    argc, &nfiles);
    if (rc == 0 && !wgpt_tokenizer_known(tokname)) {
        fprintf(stderr, "wgpt tokenize: --tokenizer '%s': unknown (gpt2 or bytes)\n", tokname);
        rc = 2;
    }
    if (rc == 0 && strcmp(split, "file") != 0 && strcmp(split, "blank-line") != 0) {
        fprintf(stderr, "wgpt tokenize: --split '%s': unknown (blank-line or file)\n", split);
        rc = 2;
    }
    if (rc == 0 && nfiles == 0) {
        fprintf(stderr, "wgpt tokenize: no input files (see --help)\n");
        rc = 2;
    }
    if (rc) {
        free(files);
        return rc == 1 ? 0 : 2;
    }
    o.val_fraction = val_fraction;
    o.split_files = strcmp(split, "file") == 0;

    char err[4096];
    wgpt_tokenizer *tok = wgpt_tokenizer_open(tokname, bpe_dir, err, sizeof err);
    if (!tok) {
        fprintf(stderr, "wgpt tokenize: %s\n", err);
        free(files);
        return 1;
    }
    o.tok = tok;
    o.stop = &wgpt_cli_stop;
    wgpt_cli_signals_install("\nwgpt tokenize: stopping; the output folder is left as it was\n");
    wgpt_corpus_result res;
    rc = wgpt_corpus_tokenize(&o, files, (size_t)nfiles, &res, err, sizeof err);
    wgpt_cli_signals_restore();
    if (rc < 0) {
        fprintf(stderr, "wgpt tokenize: %s\n", err);
    } else {
        for (size_t i = 0; i < res.set.n; i++)
            printf("wrote %s/%s (%llu tokens)\n", o.out_dir, res.set.files[i].name,
                   (unsigned long long)((res.set.files[i].bytes - WGPT_SHARD_HEADER_BYTES) / 2));
        uint64_t total = res.train_tokens + res.val_tokens;
        printf("%llu file%s, %llu bytes, %llu documents -> %llu tokens (%s, %u ids%s): train %llu tokens in %u "
               "shard%s, val %llu tokens (%.2f%%) in %u shard%s, in %s\n",
               (unsigned long long)res.files, res.files == 1 ? "" : "s", (unsigned long long)res.bytes,
               (unsigned long long)res.docs, (unsigned long long)total, tokname, wgpt_tokenizer_vocab_size(tok),
               wgpt_tokenizer_eot(tok) >= 0 ? ", end-of-text before each document" : "",
               (unsigned long long)res.train_tokens, res.train_shards, res.train_shards == 1 ? "" : "s",
               (unsigned long long)res.val_tokens, 100.0 * (double)res.val_tokens / (double)total, res.val_shards,
               res.val_shards == 1 ? "" : "s", o.out_dir);
        double share = (double)res.val_tokens / (double)total;
        if (res.val_tokens && share > 2 * o.val_fraction)
            printf("note: validation got %.1f%% of the tokens (asked: %.1f%%) because documents are few and large; "
                   "more files or --split blank-line give a finer split\n",
                   100 * share, 100 * o.val_fraction);
        if (o.val_fraction > 0 && res.val_tokens == 0)
            printf("note: no document went to validation (%llu in all); `wgpt train` will hold out the tail of the "
                   "last train shard instead\n",
                   (unsigned long long)res.docs);
        if (res.forced_cuts)
            printf("note: %llu place%s of the text had no break for megabytes (not text?): cut there, so the ids "
                   "there may differ from one encoding of the whole\n",
                   (unsigned long long)res.forced_cuts, res.forced_cuts == 1 ? "" : "s");
        if (res.note[0]) printf("note: %s\n", res.note);
        wgpt_shard_set_free(&res.set);
    }
    wgpt_tokenizer_free(tok);
    free(files);
    return rc < 0 ? 1 : 0;
}
