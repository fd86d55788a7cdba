# The few nixpkgs lib functions the generated flake calls, with nixpkgs' semantics.
let
  lib = rec {
    inherit (builtins) concatStringsSep;
    genAttrs = names: f: builtins.listToAttrs (map (n: nameValuePair n (f n)) names);
    nameValuePair = name: value: { inherit name value; };
    mapAttrs' = f: set: builtins.listToAttrs (map (n: f n set.${n}) (builtins.attrNames set));
    mapAttrsToList = f: set: map (n: f n set.${n}) (builtins.attrNames set);
    optional = cond: x: if cond then [ x ] else [ ];
    optionals = cond: xs: if cond then xs else [ ];
    optionalString = cond: s: if cond then s else "";
    optionalAttrs = cond: set: if cond then set else { };
    makeSearchPath =
      sub: pkgs: concatStringsSep ":" (map (p: "${p}/${sub}") (builtins.filter (p: p != null) pkgs));
    makeBinPath = makeSearchPath "bin";
    makeLibraryPath = makeSearchPath "lib";
    escapeShellArg = arg: "'" + builtins.replaceStrings [ "'" ] [ "'\\''" ] (toString arg) + "'";
    toLower = builtins.replaceStrings upper lower;
    upper = builtins.genList (i: builtins.substring i 1 "ABCDEFGHIJKLMNOPQRSTUVWXYZ") 26;
    lower = builtins.genList (i: builtins.substring i 1 "abcdefghijklmnopqrstuvwxyz") 26;
    warn = msg: builtins.trace "warning: ${msg}";
  };
in
lib
