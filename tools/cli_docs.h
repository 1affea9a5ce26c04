// A program's man page (roff) and bash completion, generated from its CLI11 tables: the options,
// descriptions and footers `--help` prints, so neither can disagree with `--help`.
// scripts/package.sh writes them with `hubfs --help-man`, `hubfs --help-completion` (h5chunk the same).
#pragma once

#include <CLI/CLI.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace hubfs::cli_docs {

// Text for a roff body line: backslashes kept (\e), an option-like hyphen (at a word's start, or
// after another) printed as a minus (\-) so it can be copied, and a line starting with '.' or '\''
// not taken as a request.
inline std::string roff_text(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '-' || text[i - 1] == '(' ||
                            text[i - 1] == '`' || text[i - 1] == '\n')) {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

// Every hyphen a minus: for option names.
inline std::string roff_option(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

// Options as --help lists them (hidden ones, in the empty group, are left out).
inline std::vector<const CLI::Option*> visible_options(const CLI::App& app, bool positional) {
  return app.get_options([positional](const CLI::Option* o) {
    return !o->get_group().empty() && o->get_positional() == positional && (positional || o->nonpositional());
  });
}

inline std::vector<const CLI::App*> subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty() && !s->get_group().empty(); });
}

// A flag takes no value. CLI11 gives a flag bound to a bool a type size of 1 but no type name,
// so both count (else the man page printed an empty value after --help, --hub and the like).
inline bool is_flag(const CLI::Option* o) { return o->get_type_size() == 0 || o->get_type_name().empty(); }

// Every name of an option, comma-separated ("-f,--foreground"), without the default CLI11 shows
// for a flag that takes an optional value ("--follow{60}" is typed --follow or --follow=N).
inline std::string option_names(const CLI::Option* o) {
  std::string names = o->get_name(false, true);
  for (size_t open = names.find('{'); open != std::string::npos; open = names.find('{', open)) {
    const size_t close = names.find('}', open);
    names.erase(open, close == std::string::npos ? std::string::npos : close - open + 1);
  }
  return names;
}

// "hubfs cache prune [OPTIONS] mountpoint ..." for a subcommand's heading.
inline std::string usage_line(const CLI::App& cmd, const std::string& path) {
  std::string line = "\\fB" + roff_option(path) + "\\fR";
  if (!subcommands(cmd).empty()) line += " \\fICOMMAND\\fR";
  if (!visible_options(cmd, false).empty()) line += " [\\fIOPTIONS\\fR]";
  for (const CLI::Option* p : visible_options(cmd, true)) {
    const std::string name = "\\fI" + roff_option(p->get_name(true)) + "\\fR";
    line += " " + (p->get_required() ? name : "[" + name + "]");
  }
  return line;
}

inline void options_section(std::ostringstream& out, const CLI::App& cmd) {
  for (const CLI::Option* p : visible_options(cmd, true)) {
    out << ".TP\n\\fI" << roff_option(p->get_name(true)) << "\\fR\n" << roff_text(p->get_description()) << "\n";
  }
  for (const CLI::Option* o : visible_options(cmd, false)) {
    std::string names = option_names(o);  // "-f,--foreground"
    for (size_t at = names.find(','); at != std::string::npos; at = names.find(',', at + 2)) names.replace(at, 1, ", ");
    out << ".TP\n\\fB" << roff_option(names) << "\\fR";
    if (!is_flag(o)) out << " \\fI" << roff_text(o->get_type_name()) << "\\fR";
    out << "\n" << roff_text(o->get_description()) << "\n";
  }
}

// A footer's paragraphs (its lines), each a paragraph; a line starting with spaces is an example.
inline void paragraphs(std::ostringstream& out, const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line[0] == ' ') {
      out << ".IP\n.nf\n" << roff_text(line.substr(line.find_first_not_of(' '))) << "\n.fi\n";
    } else {
      out << ".PP\n" << roff_text(line) << "\n";
    }
  }
}

inline void command_sections(std::ostringstream& out, const CLI::App& cmd, const std::string& path,
                             const std::string& parent_footer) {
  for (const CLI::App* sub : subcommands(cmd)) {
    const std::string sub_path = path + " " + sub->get_name();
    out << ".SS \"" << sub_path << "\"\n";
    out << usage_line(*sub, sub_path) << "\n.PP\n" << roff_text(sub->get_description()) << "\n";
    options_section(out, *sub);
    // Subcommands inherit their parent's footer when added: print only their own.
    if (sub->get_footer() != parent_footer) paragraphs(out, sub->get_footer());
    command_sections(out, *sub, sub_path, sub->get_footer());
  }
}

// The whole page. `summary` is the NAME line's text; `description` the app's own (its first
// line is the summary when empty).
inline std::string man_page(const CLI::App& app, const std::string& name, const std::string& version,
                            const std::string& summary, const std::string& see_also) {
  std::ostringstream out;
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out << ".\\\" Generated by `" << name << " --help-man` from the tables behind --help: do not edit.\n";
  out << ".TH " << upper << " 1 \"\" \"" << name << " " << version << "\" \"User Commands\"\n";
  out << ".SH NAME\n" << name << " \\- " << roff_text(summary) << "\n";
  out << ".SH SYNOPSIS\n";
  bool first = true;
  for (const CLI::App* sub : subcommands(app)) {
    if (!first) out << ".br\n";
    first = false;
    out << usage_line(*sub, name + " " + sub->get_name()) << "\n";
  }
  // The description's lines are one paragraph (wrapped for a terminal's --help).
  std::string description = app.get_description();
  for (char& c : description)
    if (c == '\n') c = ' ';
  out << ".SH DESCRIPTION\n" << roff_text(description) << "\n";
  out << ".SH COMMANDS\n";
  command_sections(out, app, name, app.get_footer());
  out << ".SH OPTIONS\n";
  options_section(out, app);
  if (!app.get_footer().empty()) {
    out << ".SH NOTES\n";
    paragraphs(out, app.get_footer());
  }
  if (!see_also.empty()) out << ".SH SEE ALSO\n" << roff_text(see_also) << "\n";
  return out.str();
}

// A bash completion script: subcommands, then each (sub)command's options; files otherwise.
inline std::string bash_completion(const CLI::App& app, const std::string& name) {
  std::ostringstream cases;
  std::vector<std::pair<const CLI::App*, std::string>> todo{{&app, ""}};
  while (!todo.empty()) {
    auto [cmd, path] = todo.back();
    todo.pop_back();
    std::string subs, opts;
    for (const CLI::App* sub : subcommands(*cmd)) {
      subs += sub->get_name() + " ";
      todo.emplace_back(sub, path.empty() ? sub->get_name() : path + " " + sub->get_name());
    }
    for (const CLI::Option* o : visible_options(*cmd, false)) {
      std::string all = option_names(o);
      for (char& c : all)
        if (c == ',') c = ' ';
      opts += all + " ";
    }
    cases << "    \"" << path << "\") subs=\"" << subs << "\" opts=\"" << opts << "\" ;;\n";
  }
  std::string fn = "_" + name;
  std::ostringstream out;
  out << "# bash completion for " << name << "; generated by `" << name
      << " --help-completion` from the tables behind --help: do not edit.\n"
      << fn << "() {\n"
      << "  local cur=${COMP_WORDS[COMP_CWORD]} path=\"\" w subs opts i\n"
      << "  # The (sub)commands typed so far, e.g. \"cache prune\".\n"
      << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      << "    w=${COMP_WORDS[i]}\n"
      << "    case \"${path:+$path }$w\" in\n";
  // Known command paths.
  std::vector<std::pair<const CLI::App*, std::string>> walk{{&app, ""}};
  std::string known;
  while (!walk.empty()) {
    auto [cmd, path] = walk.back();
    walk.pop_back();
    for (const CLI::App* sub : subcommands(*cmd)) {
      const std::string p = path.empty() ? sub->get_name() : path + " " + sub->get_name();
      known += (known.empty() ? "\"" : "|\"") + p + "\"";
      walk.emplace_back(sub, p);
    }
  }
  out << "      " << known << ") path=\"${path:+$path }$w\" ;;\n"
      << "    esac\n"
      << "  done\n"
      << "  case \"$path\" in\n"
      << cases.str() << "    *) subs=\"\" opts=\"\" ;;\n"
      << "  esac\n"
      << "  if [[ $cur == -* ]]; then\n"
      << "    mapfile -t COMPREPLY < <(compgen -W \"$opts\" -- \"$cur\")\n"
      << "  elif [[ -n $subs ]]; then\n"
      << "    mapfile -t COMPREPLY < <(compgen -W \"$subs\" -- \"$cur\")\n"
      << "  else\n"
      << "    mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n"
      << "  fi\n"
      << "}\n"
      << "complete -o filenames -F " << fn << " " << name << "\n";
  return out.str();
}

}  // namespace hubfs::cli_docs
