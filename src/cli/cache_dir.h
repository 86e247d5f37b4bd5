// cache_dir.h: the folder of Dawn's pipeline cache (wgpt_gpu_options.cache_dir)
// for the commands: $WGPT_CACHE_DIR (empty or "off": no cache), else
// $XDG_CACHE_HOME/wgpt, else $HOME/.cache/wgpt. Deleting it is always safe.
#ifndef WGPT_CACHE_DIR_H
#define WGPT_CACHE_DIR_H

// The folder, or NULL for no cache (the variable says so, or no HOME). The
// string stays valid until the next call.
const char *wgpt_cli_cache_dir(void);

#endif
