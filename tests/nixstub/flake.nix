# Test double for nixpkgs: just the attributes ReproBridge's generated flake.nix uses.
# Tests swap it in with `--override-input nixpkgs path:<store path of a prepared copy>`;
# see README.md. Nothing here says anything about real nixpkgs.
{
  description = "ReproBridge test stub for nixpkgs (tests only)";

  outputs =
    { self }:
    {
      lib = import ./lib.nix;
      # `nix develop` looks up bashInteractive in the (overridden) nixpkgs input.
      legacyPackages = self.lib.genAttrs [ "x86_64-linux" "aarch64-linux" ] (
        system: import ./default.nix { inherit system; }
      );
    };
}
