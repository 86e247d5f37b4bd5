// data_files.h: where the files wgpt ships with (GPT-2's tokenizer files) are,
// found from the executable's own location so that wgpt runs from any folder:
// in the build tree (build/wgpt -> third_party/gpt2-bpe) or installed with
// `make install PREFIX=P` (P/bin/wgpt -> P/share/wgpt/gpt2-bpe).
#ifndef WGPT_DATA_FILES_H
#define WGPT_DATA_FILES_H

// The folder holding encoder.json and vocab.bpe: the first of
// EXE_DIR/../share/wgpt/gpt2-bpe and EXE_DIR/../third_party/gpt2-bpe that has
// them, else "third_party/gpt2-bpe" (relative to the current folder). A
// static string.
const char *wgpt_default_bpe_dir(void);

#endif
