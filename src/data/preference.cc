#include "data/preference.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace st {
namespace {

constexpr const char* kFixedKinds[] = {"intel", "prompt_pairs", "argilla", "ultra", "icr", "argilla_chat"};

// "chatml.intel" -> {"chatml", "intel"}; {"", ""} for any other type.
std::pair<std::string, std::string> fixed_parts(const std::string& type) {
  const size_t dot = type.find('.');
  if (dot == std::string::npos) return {};
  std::string family = type.substr(0, dot), kind = type.substr(dot + 1);
  if (family != "chatml" && family != "llama3") return {};
  if (std::find(std::begin(kFixedKinds), std::end(kFixedKinds), kind) == std::end(kFixedKinds)) return {};
  return {std::move(family), std::move(kind)};
}

}  // namespace

bool is_preference_type(const std::string& type) { return type == "preference" || !fixed_parts(type).first.empty(); }

std::vector<std::string> preference_types() {
  std::vector<std::string> out = {"preference"};
  for (const char* family : {"chatml", "llama3"})
    for (const char* kind : kFixedKinds) out.push_back(std::string(family) + "." + kind);
  return out;
}

std::string preference_fixed_template(const std::string& type) { return fixed_parts(type).first; }

namespace {

// A record as messages: the prompt, and each response's turns that follow it.
struct PairTurns {
  std::vector<ChatMessage> prompt, chosen, rejected;
};

// A message of a type preference record, its role and content under RecordFields' names.
StatusOr<ChatMessage> message_of(const OrderedJson& m, const RecordFields& f, const std::string& what) {
  if (!m.is_object()) return InvalidArgument(Str() << what << ": not a message ({role, content})");
  OrderedJson r = m;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{f.role, "role"}, {f.content, "content"}}) {
    if (from.empty() || from == to) continue;
    if (!m.contains(from)) return InvalidArgument(Str() << what << ": missing field '" << from << "'");
    r[to] = m[from];
  }
  return detail::chat_message(r, what);
}

// The prompt: field messages (f.messages), else prompt; a list of turns or a string (one user turn).
StatusOr<std::vector<ChatMessage>> prompt_of(const OrderedJson& j, const RecordFields& f, const std::string& what) {
  std::string key = f.messages;
  if (key.empty()) key = j.contains("messages") ? "messages" : "prompt";
  if (!j.contains(key))
    return InvalidArgument(Str() << what << ": missing field '" << key << "'" << (f.messages.empty() ? " (or 'messages')" : ""));
  const OrderedJson& p = j[key];
  if (p.is_string()) return std::vector<ChatMessage>{{"user", p.get<std::string>()}};
  if (!p.is_array()) return InvalidArgument(Str() << what << ": '" << key << "' is neither a string nor a list of messages");
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < p.size(); ++i) {
    ASSIGN_OR_RETURN(ChatMessage m, message_of(p[i], f, Str() << what << ": " << key << "[" << i << "]"));
    msgs.push_back(std::move(m));
  }
  return msgs;
}

bool same_message(const ChatMessage& a, const ChatMessage& b) {
  if (a.role != b.role || a.content != b.content || a.tool_calls.size() != b.tool_calls.size()) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i)
    if (a.tool_calls[i].name != b.tool_calls[i].name || a.tool_calls[i].arguments_json != b.tool_calls[i].arguments_json)
      return false;
  return true;
}

// A response: a string (the reply), a message, or a list of messages following the prompt (a list
// that starts with the prompt's turns, as UltraFeedback-binarized stores whole conversations,
// loses them). Every turn is the assistant's, with something in it.
StatusOr<std::vector<ChatMessage>> response_of(const OrderedJson& j, const std::string& key,
                                               const std::vector<ChatMessage>& prompt, const RecordFields& f,
                                               const std::string& what) {
  if (!j.contains(key)) return InvalidArgument(Str() << what << ": missing field '" << key << "'");
  const OrderedJson& r = j[key];
  std::vector<ChatMessage> msgs;
  if (r.is_string()) {
    msgs.push_back({"assistant", r.get<std::string>()});
  } else if (r.is_object()) {
    ASSIGN_OR_RETURN(ChatMessage m, message_of(r, f, Str() << what << ": '" << key << "'"));
    msgs.push_back(std::move(m));
  } else if (r.is_array()) {
    for (size_t i = 0; i < r.size(); ++i) {
      ASSIGN_OR_RETURN(ChatMessage m, message_of(r[i], f, Str() << what << ": " << key << "[" << i << "]"));
      msgs.push_back(std::move(m));
    }
    const auto n = static_cast<std::ptrdiff_t>(prompt.size());
    if (!prompt.empty() && msgs.size() >= prompt.size() && std::equal(prompt.begin(), prompt.end(), msgs.begin(), same_message)) {
      msgs.erase(msgs.begin(), msgs.begin() + n);
      if (msgs.empty())
        return InvalidArgument(Str() << what << ": '" << key << "' repeats the prompt's turns and adds no response");
    }
  } else {
    return InvalidArgument(Str() << what << ": '" << key << "' is neither a string, a message nor a list of messages");
  }
  if (msgs.empty()) return InvalidArgument(Str() << what << ": '" << key << "' is an empty list (no response)");
  for (const ChatMessage& m : msgs) {
    if (m.role != "assistant")
      return InvalidArgument(Str() << what << ": '" << key << "' has a message of role '" << m.role
                                   << "'; a response is the assistant's (a list that repeats the prompt must repeat all "
                                   << "of its turns, exactly)");
    if (m.content.empty() && m.tool_calls.empty()) return InvalidArgument(Str() << what << ": '" << key << "' is an empty response");
  }
  return msgs;
}

// Note [implicit prompt]: a record with no prompt field whose chosen and rejected are whole
// conversations (TRL's "preference with implicit prompt", e.g. trl-lib/ultrafeedback_binarized)
// takes as its prompt the turns both share from the start (TRL's extract_prompt: up to the first
// turn that differs); response_of then drops them from each side. Replies given as strings have
// no turns to share and are refused with the missing prompt; so are sides that share no first
// turn, or where one's turns are all the other's first ones (no differing response).
StatusOr<std::vector<ChatMessage>> implicit_prompt(const OrderedJson& j, const std::string& ck, const std::string& rk,
                                                   const RecordFields& f, const std::string& what) {
  std::vector<ChatMessage> side[2];
  const std::string keys[2] = {ck, rk};
  for (int s = 0; s < 2; ++s)
    for (size_t i = 0; i < j[keys[s]].size(); ++i) {
      ASSIGN_OR_RETURN(ChatMessage m, message_of(j[keys[s]][i], f, Str() << what << ": " << keys[s] << "[" << i << "]"));
      side[s].push_back(std::move(m));
    }
  size_t k = 0;
  while (k < side[0].size() && k < side[1].size() && same_message(side[0][k], side[1][k])) ++k;
  if (k == 0)
    return InvalidArgument(Str() << what << ": no 'prompt' (or 'messages') field, and '" << ck << "' and '" << rk
                                 << "' share no first turn to take as the prompt");
  if (k == side[0].size() || k == side[1].size())
    return InvalidArgument(Str() << what << ": no 'prompt' (or 'messages') field, and one of '" << ck << "' / '" << rk
                                 << "' holds only turns the other starts with: no response differs");
  side[0].resize(k);
  return side[0];
}

StatusOr<PairTurns> preference_turns(const OrderedJson& j, const RecordFields& f, const std::string& what) {
  if (!j.is_object()) return InvalidArgument(Str() << what << ": not a JSON object");
  PairTurns t;
  const std::string ck = f.chosen.empty() ? "chosen" : f.chosen, rk = f.rejected.empty() ? "rejected" : f.rejected;
  const bool implicit = f.messages.empty() && !j.contains("messages") && !j.contains("prompt") && j.contains(ck) &&
                        j.contains(rk) && j[ck].is_array() && j[rk].is_array();
  if (implicit) {
    ASSIGN_OR_RETURN(t.prompt, implicit_prompt(j, ck, rk, f, what));  // Note [implicit prompt]
  } else {
    ASSIGN_OR_RETURN(t.prompt, prompt_of(j, f, what));
  }
  ASSIGN_OR_RETURN(t.chosen, response_of(j, ck, t.prompt, f, what));
  ASSIGN_OR_RETURN(t.rejected, response_of(j, rk, t.prompt, f, what));
  return t;
}

// chatml.ultra / llama3.ultra: the reply is the content of key[1] (key holds [user, assistant]).
StatusOr<std::string> ultra_reply(const OrderedJson& j, const char* key, const std::string& what) {
  if (!j.contains(key)) return InvalidArgument(Str() << what << ": missing field '" << key << "'");
  const OrderedJson& r = j[key];
  if (!r.is_array() || r.size() < 2)
    return InvalidArgument(Str() << what << ": '" << key << "' is not a list of [user, assistant] messages");
  const std::string w = Str() << what << ": " << key << "[1]";
  if (r[1].is_object() && r[1].contains("role") && r[1]["role"] != "assistant")
    return InvalidArgument(Str() << w << " has role " << r[1]["role"].dump() << "; the response is the assistant's");
  return detail::string_field(r[1], "content", w);
}

// axolotl's fixed-format prompt (dpo/ and kto/ chatml.py, llama3.py): [system?], the user turn.
// argilla_chat has no system turn and its own prompt (its callers read it).
StatusOr<std::vector<ChatMessage>> fixed_prompt(const std::string& kind, const OrderedJson& j, const std::string& what) {
  std::string system;
  if (j.contains("system") && !j["system"].is_null()) {
    ASSIGN_OR_RETURN(system, detail::string_field(j, "system", what));
  }
  const char* prompt_key = kind == "intel" ? "question" : kind == "icr" ? "input" : "prompt";
  if (kind == "argilla") {  // as axolotl: the first of these that the record has
    prompt_key = "instruction";
    for (const char* k : {"prompt", "input", "question"})
      if (j.contains(k)) { prompt_key = k; break; }
  }
  ASSIGN_OR_RETURN(std::string user, detail::string_field(j, prompt_key, what));
  std::vector<ChatMessage> prompt;
  if (!system.empty()) prompt.push_back({"system", std::move(system)});
  prompt.push_back({"user", std::move(user)});
  return prompt;
}

// axolotl's fixed-format pair strategies (dpo/chatml.py, dpo/llama3.py): the prompt, the replies.
StatusOr<PairTurns> fixed_turns(const std::string& kind, const OrderedJson& j, const std::string& what) {
  if (!j.is_object()) return InvalidArgument(Str() << what << ": not a JSON object");
  const char* keys[2] = {"chosen", "rejected"};
  if (kind == "argilla") {
    if (!j.contains("chosen")) keys[0] = "chosen_response";
    if (!j.contains("rejected")) keys[1] = "rejected_response";
  }
  PairTurns t;
  if (kind == "argilla_chat") {  // chosen: [user, assistant]; the user turn is chosen[0]'s content
    if (!j.contains("chosen") || !j["chosen"].is_array() || j["chosen"].empty())
      return InvalidArgument(Str() << what << ": 'chosen' is not a list of [user, assistant] messages");
    ASSIGN_OR_RETURN(std::string user, detail::string_field(j["chosen"][0], "content", Str() << what << ": chosen[0]"));
    t.prompt.push_back({"user", std::move(user)});
  } else {
    ASSIGN_OR_RETURN(t.prompt, fixed_prompt(kind, j, what));
  }
  for (int side = 0; side < 2; ++side) {
    std::string reply;
    if (kind == "ultra" || kind == "argilla_chat") {
      ASSIGN_OR_RETURN(reply, ultra_reply(j, keys[side], what));
    } else {
      ASSIGN_OR_RETURN(reply, detail::string_field(j, keys[side], what));
    }
    if (reply.empty()) return InvalidArgument(Str() << what << ": '" << keys[side] << "' is an empty response");
    (side == 0 ? t.chosen : t.rejected).push_back({"assistant", std::move(reply)});
  }
  return t;
}

// An unpaired record (Note [unpaired records]): the prompt and the one response.
struct UnpairedTurns {
  std::vector<ChatMessage> prompt, response;
};

StatusOr<UnpairedTurns> unpaired_turns(const std::string& type, const OrderedJson& j, const RecordFields& f,
                                       const std::string& what) {
  if (!j.is_object()) return InvalidArgument(Str() << what << ": not a JSON object");
  UnpairedTurns t;
  if (type == "preference") {
    ASSIGN_OR_RETURN(t.prompt, prompt_of(j, f, what));
    ASSIGN_OR_RETURN(t.response, response_of(j, "completion", t.prompt, f, what));
    return t;
  }
  const std::string kind = fixed_parts(type).second;
  if (kind == "icr")
    return InvalidArgument(Str() << what << ": type " << type << " has no unpaired (KTO) form; use "
                                 << fixed_parts(type).first << ".prompt_pairs or preference");
  if (kind == "argilla_chat") {  // completion: the conversation, its last message the reply
    if (!j.contains("completion") || !j["completion"].is_array() || j["completion"].size() < 2)
      return InvalidArgument(Str() << what << ": 'completion' is not a list of messages ending with the assistant's reply");
    const OrderedJson& c = j["completion"];
    for (size_t i = 0; i < c.size(); ++i) {
      ASSIGN_OR_RETURN(ChatMessage m, message_of(c[i], f, Str() << what << ": completion[" << i << "]"));
      (i + 1 < c.size() ? t.prompt : t.response).push_back(std::move(m));
    }
    if (t.response[0].role != "assistant")
      return InvalidArgument(Str() << what << ": the last message of 'completion' has role '" << t.response[0].role
                                   << "'; the reply is the assistant's");
  } else {
    ASSIGN_OR_RETURN(t.prompt, fixed_prompt(kind, j, what));
    ASSIGN_OR_RETURN(std::string reply, detail::string_field(j, "completion", what));
    t.response.push_back({"assistant", std::move(reply)});
  }
  if (t.response[0].content.empty() && t.response[0].tool_calls.empty())
    return InvalidArgument(Str() << what << ": 'completion' is an empty response");
  return t;
}

// KTO's label: true (a desirable completion) or false.
StatusOr<int8_t> unpaired_label(const OrderedJson& j, const std::string& what) {
  if (!j.contains("label"))
    return InvalidArgument(Str() << what << ": missing field 'label' (true: a desirable completion, false: an undesirable one)");
  const OrderedJson& l = j["label"];
  if (!l.is_boolean())
    return InvalidArgument(Str() << what << ": 'label' is " << l.dump() << ", not true (desirable) or false (undesirable)");
  return static_cast<int8_t>(l.get<bool>() ? 1 : -1);
}

size_t common_prefix(std::string_view a, std::string_view b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first - a.begin());
}

// Note [preference masks]: prompt + response is rendered and tokenized exactly as type messages
// renders a conversation (Note [chat tokenization]); what differs is which trained segments keep
// their labels: only those at or after the prompt's border, the byte where the response's
// rendering starts. The border is the longest prefix that the whole text shares with the prompt
// rendered alone, or with the prompt's generation prompt (TRL's prompt: add_generation_prompt),
// whichever is longer: each ends before the response and runs past every turn of the prompt
// (a template like Mistral v3's, which moves the system text to the last user turn, departs from
// the whole text only after the prompt's assistant turns). A trained segment straddling the border
// (a generation prompt that opens the reply, Qwen3-Thinking's "<think>\n") is trained after it.
struct PromptTexts {
  std::vector<std::string> texts;  // the prompt rendered alone and its generation prompt, those that render
  Status error;                    // why neither did
};

PromptTexts prompt_texts(const ChatTemplate& chat, const std::vector<ChatMessage>& prompt) {
  PromptTexts p;
  if (prompt.empty()) return p;
  StatusOr<std::string> alone = render_chat_text(chat, prompt);
  StatusOr<std::string> gen = render_generation_prompt(chat, prompt);
  if (alone.ok()) p.texts.push_back(std::move(*alone));
  if (gen.ok()) p.texts.push_back(std::move(*gen));
  if (p.texts.empty()) p.error = alone.status();
  return p;
}

StatusOr<Sample> tokenize_side(const ChatTemplate& chat, const std::vector<ChatMessage>& prompt, const PromptTexts& pt,
                               const std::vector<ChatMessage>& response, const Tokenizer& tok, const std::string& what,
                               int8_t pair) {
  std::vector<ChatMessage> msgs = prompt;
  msgs.insert(msgs.end(), response.begin(), response.end());
  ASSIGN_OR_RETURN(std::vector<ChatSegment> segs, render_chat(chat, msgs, what));
  if (!pt.error.ok()) return pt.error.with_context(what + ": rendering the prompt");
  std::string whole;
  for (const ChatSegment& g : segs) whole += g.text;
  size_t border = 0;
  for (const std::string& t : pt.texts) border = std::max(border, common_prefix(t, whole));
  std::vector<ChatSegment> masked;
  size_t pos = 0;
  for (ChatSegment& g : segs) {
    const size_t end = pos + g.text.size();
    if (g.trained && pos < border && end > border) {
      masked.push_back({g.text.substr(0, border - pos), false});
      masked.push_back({g.text.substr(border - pos), true});
    } else {
      masked.push_back({std::move(g.text), g.trained && pos >= border});
    }
    pos = end;
  }
  Sample s = detail::tokenize_chat(masked, tok, false);
  s.pair = pair;
  return s;
}

}  // namespace

StatusOr<PreferencePair> tokenize_preference(const std::string& type, const OrderedJson& j, const RecordFields& f,
                                             const Tokenizer& tok, const ChatTemplate& chat, const std::string& what,
                                             int64_t* system_dropped) {
  PairTurns t;
  if (type == "preference") {
    ASSIGN_OR_RETURN(t, preference_turns(j, f, what));
  } else if (const auto [family, kind] = fixed_parts(type); !family.empty()) {
    ASSIGN_OR_RETURN(t, fixed_turns(kind, j, what));
  } else {
    return InvalidArgument(Str() << what << ": '" << type << "' is not a preference dataset type");
  }
  const PromptTexts pt = prompt_texts(chat, t.prompt);
  PreferencePair p;
  ASSIGN_OR_RETURN(p.chosen, tokenize_side(chat, t.prompt, pt, t.chosen, tok, what + ": chosen", 1));
  ASSIGN_OR_RETURN(p.rejected, tokenize_side(chat, t.prompt, pt, t.rejected, tok, what + ": rejected", 2));
  if (system_dropped) {
    std::vector<ChatMessage> msgs = t.prompt;
    msgs.insert(msgs.end(), t.chosen.begin(), t.chosen.end());
    if (mistral_drops_system(chat, msgs)) ++*system_dropped;
  }
  return p;
}

StatusOr<Sample> tokenize_unpaired(const std::string& type, const OrderedJson& j, const RecordFields& f,
                                   const Tokenizer& tok, const ChatTemplate& chat, const std::string& what,
                                   int64_t* system_dropped) {
  if (!is_preference_type(type)) return InvalidArgument(Str() << what << ": '" << type << "' is not a preference dataset type");
  ASSIGN_OR_RETURN(UnpairedTurns t, unpaired_turns(type, j, f, what));
  ASSIGN_OR_RETURN(int8_t label, unpaired_label(j, what));
  ASSIGN_OR_RETURN(Sample s, tokenize_side(chat, t.prompt, prompt_texts(chat, t.prompt), t.response, tok, what, 0));
  s.kto = label;
  if (system_dropped) {
    std::vector<ChatMessage> msgs = t.prompt;
    msgs.insert(msgs.end(), t.response.begin(), t.response.end());
    if (mistral_drops_system(chat, msgs)) ++*system_dropped;
  }
  return s;
}

StatusOr<PreferencePair> tokenize_preference_record(const std::string& type, const std::string& json_line,
                                                    const Tokenizer& tok, const ChatTemplate* chat,
                                                    const DatasetOptions& opt, const std::string& what,
                                                    const RecordFields& f) {
  if (!is_preference_type(type)) return InvalidArgument(Str() << what << ": '" << type << "' is not a preference dataset type");
  ASSIGN_OR_RETURN(OrderedJson j, parse_ordered_json(json_line, what));
  ChatTemplate own;
  if (!chat || !preference_fixed_template(type).empty()) {
    ASSIGN_OR_RETURN(own, detail::dataset_chat_template(type, opt.chat_template, tok, opt));
    chat = &own;
  }
  ASSIGN_OR_RETURN(PreferencePair p, tokenize_preference(type, j, f, tok, *chat, what));
  RETURN_IF_ERROR(detail::finish_sample(&p.chosen, tok, opt, true, what));
  RETURN_IF_ERROR(detail::finish_sample(&p.rejected, tok, opt, true, what));
  return p;
}

}  // namespace st
