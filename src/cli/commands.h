// commands.h: one entry point per `wgpt` subcommand (argv[0] is its name).
#ifndef WGPT_COMMANDS_H
#define WGPT_COMMANDS_H

int wgpt_cmd_info(int argc, char **argv);
int wgpt_cmd_bench(int argc, char **argv);
int wgpt_cmd_train(int argc, char **argv);
int wgpt_cmd_sample(int argc, char **argv);
int wgpt_cmd_eval(int argc, char **argv);
int wgpt_cmd_tokenize(int argc, char **argv);
int wgpt_cmd_export(int argc, char **argv);
int wgpt_cmd_serve(int argc, char **argv);

#endif
